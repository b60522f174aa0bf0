"""The train, decode and scaling workloads of `benchmarks/side_by_side.py`: build every
system, warm each up once, then for each repeat time one measurement of every system in turn
(alternating, so that load on a shared machine hits all alike), and keep tokens/s of every
measurement."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from benchmarks.peers import DECODE, TRAIN, ctranslate2_peer, ours
from benchmarks.peers.spec import Spec, Unsupported

SCALING_LENGTHS = (16, 32, 64, 128, 256)  # forced output lengths of the scaling sweep
SERVING_BATCHES = (8, 64)
SERVING_SENTENCES = 256  # the first sources of the bundled test split, in file order


@dataclass(frozen=True)
class Timed:
    """One system's calls: `warm` once (tracing, checks), then `measure` per repeat."""

    warm: Callable[[], object]
    measure: Callable[[], object]
    tokens: int  # counted per measurement (sentences for serving)
    parameters: int


def alternate(systems: dict[Hashable, Timed], repeats: int) -> dict[Hashable, list[float]]:
    """Warm every system once, then `repeats` rounds of one measurement each: tokens/s."""
    for system in systems.values():
        system.warm()
    rates = {key: [] for key in systems}
    for _ in range(repeats):
        for key, system in systems.items():
            start = time.perf_counter()
            system.measure()
            rates[key].append(system.tokens / (time.perf_counter() - start))
    return rates


def build(makers: dict[str, Callable], skipped: dict[str, str]) -> dict:
    """`{name: make()}` for the systems whose libraries import and that can run the workload;
    the others in `skipped`, with why."""
    built = {}
    for name, make in makers.items():
        try:
            built[name] = make()
        except (ImportError, Unsupported) as error:
            missing = isinstance(error, ImportError)
            skipped[name] = f"not installed ({error})" if missing else str(error)
            print(f"skipping {name}: {skipped[name]}", flush=True)
    return built


def _checked(name: str, run: Callable, length: int) -> Callable[[], None]:
    def warm() -> None:
        lengths = run()
        if (lengths != length).any():
            raise ValueError(f"{name} decoded lengths {sorted(set(lengths))}, not {length}")

    return warm


def _decode_timed(name, run, parameters, spec: Spec) -> Timed:
    def measure():
        return [run() for _ in range(spec.steps)]

    tokens = spec.batch * spec.out_length * spec.steps
    return Timed(_checked(name, run, spec.out_length), measure, tokens, parameters)


def _summary(workload: str, rates: dict, parameters: dict, skipped: dict) -> dict:
    return {
        "workload": workload,
        "tokens_per_s": {name: statistics.median(r) for name, r in rates.items()},
        "runs": rates, "parameters": parameters, "skipped": skipped,
    }  # fmt: skip


def train(spec: Spec, names: list[str], repeats: int) -> dict:
    skipped = {}
    built = build({name: lambda make=TRAIN[name]: make(spec) for name in names}, skipped)
    systems = {
        name: Timed(lambda run=run: run(1), lambda run=run: run(spec.steps),
                    spec.batch * spec.length * spec.steps, parameters)
        for name, (run, parameters) in built.items()
    }  # fmt: skip
    rates = alternate(systems, repeats)
    return _summary("train", rates, {n: s.parameters for n, s in systems.items()}, skipped)


def decode(spec: Spec, names: list[str], repeats: int) -> dict:
    skipped = _ctranslate2_missing(names)
    model = ours.build_model(spec)
    makers = {name: lambda make=DECODE[name]: make(spec, model) for name in names}
    built = build({n: m for n, m in makers.items() if n not in skipped}, skipped)
    systems = {name: _decode_timed(name, run, p, spec) for name, (run, p) in built.items()}
    rates = alternate(systems, repeats)
    return _summary("decode", rates, {n: s.parameters for n, s in systems.items()}, skipped)


def _ctranslate2_missing(names: list[str]) -> dict[str, str]:
    reason = ctranslate2_peer.missing()
    skipped = {n: reason for n in names if n.startswith("ctranslate2") and reason}
    for name, why in skipped.items():
        print(f"skipping {name}: {why}", flush=True)
    return skipped


def scaling(spec: Spec, names: list[str], repeats: int, model_dir: str | None) -> dict:
    """(a) decode tokens/s of ours and CTranslate2 at each forced output length, and the cost
    per output token relative to the shortest; (b) serving sentences/s at batch 8 and 64
    (ours, a trained `model_dir` only)."""
    skipped = _ctranslate2_missing(names)
    model = ours.build_model(spec.replace(out_length=max(SCALING_LENGTHS)))

    def per_length(make: Callable[[Spec], tuple]) -> dict:
        return {n: make(spec.replace(out_length=n)) for n in SCALING_LENGTHS}

    def ctranslate2(kind: str) -> dict:
        translator = ctranslate2_peer.load(model, kind)  # one conversion for every length
        return per_length(lambda s: ctranslate2_peer.make_decode(s, model, kind, translator))

    makers = {ours.NAME: lambda: per_length(lambda s: ours.make_decode(s, model))}
    for kind in ctranslate2_peer.COMPUTE_TYPES:
        if f"ctranslate2-{kind}" in names and f"ctranslate2-{kind}" not in skipped:
            makers[f"ctranslate2-{kind}"] = lambda kind=kind: ctranslate2(kind)
    built = build(makers, skipped)
    systems = {  # length by length, so that each length's systems run close together
        (name, n): _decode_timed(name, *built[name][n], spec.replace(out_length=n))
        for n in SCALING_LENGTHS
        for name in built
    }  # fmt: skip
    rates = alternate(systems, repeats)
    result = _summary("scaling", {}, {}, skipped)
    for (name, n), runs in rates.items():
        result["tokens_per_s"].setdefault(name, {})[str(n)] = statistics.median(runs)
        result["runs"].setdefault(name, {})[str(n)] = runs
        result["parameters"][name] = systems[name, n].parameters
    result["relative_cost"] = relative_cost(result["runs"])
    result["serving"] = serving(model_dir, spec.beam, repeats)
    return result


def relative_cost(runs: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Cost per output token at each length over the cost at the shortest: the median over
    rounds of each round's ratio (load drifts between rounds more than within one)."""
    shortest = str(SCALING_LENGTHS[0])
    return {
        name: {n: statistics.median(a / b for a, b in zip(by_length[shortest], rates))
               for n, rates in by_length.items()}
        for name, by_length in runs.items()
    }  # fmt: skip


def serving(model_dir: str | None, beam: int, repeats: int) -> dict:
    """Sentences/s of the exported `serving_default` (in process) at each serving batch."""
    import tempfile

    from keras_transformer.data.corpus import read_pairs

    if model_dir is None:
        print("skipping serving: no trained model directory (--model-dir)", flush=True)
        return {"skipped": "no trained model directory (--model-dir)"}
    sentences = [s for s, _ in read_pairs("sample_en_de", "test", limit=SERVING_SENTENCES)]
    with tempfile.TemporaryDirectory() as workdir:
        runs = ours.make_serving(model_dir, workdir, beam, sentences, SERVING_BATCHES)
        rates = alternate({b: Timed(r, r, len(sentences), 0) for b, r in runs.items()}, repeats)
    return {
        "model_dir": model_dir, "sentences": len(sentences), "beam": beam,
        "sentences_per_s": {str(b): statistics.median(r) for b, r in rates.items()},
        "runs": {str(b): r for b, r in rates.items()},
    }  # fmt: skip
