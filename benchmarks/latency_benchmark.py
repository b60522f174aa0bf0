"""Latency of one sentence a request (p50/p90 by source length), ours beside CTranslate2,
and where one request's time goes.

    python benchmarks/run.py serving single --model-dir runs/sample_en_de --grpc --profile
    python benchmarks/run.py serving single --untrained base --rounds 3
    python benchmarks/run.py serving single --model-dir RUN --bfloat16   # AMX / AVX512_BF16

Sentences of about 5, 20 and 50 source pieces (the run's SentencePiece model) come from the
bundled test split (`--per-length` of each, the nearest in length among the lines our
segmenter keeps whole: a line of several sentences is a batch of searches for us and one
sequence for CTranslate2). Each request is one sentence:

- "ours": `serving_default` of the float32 export; with `--xla` also the `--jit-compile`
  export (XLA over fixed-size buffers: fewer, fused kernels a step); with `--bfloat16` also
  the `--dtype bfloat16` export (emulated, so slow, on CPUs without bfloat16 units: measure
  it where they exist), and with both flags the bfloat16 XLA export. Each export in a
  process of its own per thread count (`--our-threads`, default 1 and the cores: TensorFlow
  sizes its intra-op and inter-op pools once a process, as TF Serving's
  `--tensorflow_intra_op_parallelism` and `--tensorflow_inter_op_parallelism` set them) that
  times its requests (`benchmarks.savedmodel_process`); with `--grpc` also the float32
  export through `keras_transformer.serving.client` to the TF Serving test double on
  127.0.0.1, in this process;
- "CTranslate2": `translate_batch` of the same model converted (`serving.ctranslate2_export`)
  with one sentence, beam 4, at most source + 50 pieces, float32 and int8, SentencePiece
  encoding and decoding in Python included (what our signature does in its graph); each
  compute type in a process of its own that times its requests
  (`benchmarks.ctranslate2_process`: two translators in one process slow each other ~10x),
  with `intra_threads` of 1 and of the machine's cores (`--peer-threads`). Neither is its
  fastest everywhere on the 2-core EPYC: one thread for the small model after a pause
  (2.4 against 9.8 ms) and at ~50 pieces, the cores at base
  (2026-11-29-issue-54-idle-requests.md).

Neither thread count is ours' fastest everywhere either: one thread halves the default
export's one-sentence latency for the small model, and makes the XLA export 2.4x slower at
base (2026-11-29-issue-54-our-threads.md).

`--idle-ms 50` sleeps before each timed request: a person's requests arrive after a pause,
and after one every runtime starts colder (on the 2-core KVM EPYC, ~0.3 ms more for a single
TensorFlow op, ~2 ms more for our 5-piece request, ~0.6 ms for CTranslate2's).

`--throughput 64` measures sentences/s instead: the test split's lines of one sentence
(the first `--sentences`) in batches of 64 through each system (the issue-54 comparison of
the float32 and bfloat16 exports with CTranslate2; `--untrained base` for base size, whose
random weights run every search to its length limit); `--cpu-isa avx2` caps oneDNN and
CTranslate2 to AVX2, the issue's stand-in for a CPU without bfloat16 units. Systems
alternate within each round. `--profile` splits
our in-process request into string work (tokenize, split, detokenize, join), the encoder,
and the search steps (loop steps counted, each one's share too), from the same `Translator`
timed in parts (with `--xla` the XLA one as well). `--stop-lookahead limit next` runs each
of our systems with both early stopping rules (`SearchOptions.stop_lookahead`: "next" stops
about where CTranslate2 does).
Results: Markdown on stdout, JSON with machine, versions and command in `--output`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import flags, machine  # noqa: E402
from benchmarks.process_worker import Timed  # noqa: E402
from benchmarks.serving_benchmark import (  # noqa: E402
    add_model_arguments,
    environment,
    model_dir_for,
)
from keras_transformer import artifacts  # noqa: E402
from keras_transformer.config import STOP_LOOKAHEADS, SearchOptions  # noqa: E402
from keras_transformer.data.corpus import read_pairs  # noqa: E402
from keras_transformer.data.segmenter import segment  # noqa: E402
from keras_transformer.tracing import graph_function

LENGTHS = (5, 20, 50)  # source pieces of the three request sizes
STOP_NAMES = {"limit": "", "next": ", next-step stop"}  # system name tails by stop_lookahead


def pick_sentences(
    texts: list[str], count_pieces, target: int, per_length: int, join: bool = True
) -> list[str]:
    """`per_length` texts of about `target` pieces: the nearest in length, and texts of
    consecutive lines joined until they reach `target` where too few are within 20%. Without
    `join`: the nearest `per_length` whatever their distance, never joined (texts of one
    sentence stay one sentence)."""
    counted = sorted(((abs(count_pieces(t) - target), t) for t in texts), key=lambda x: x[0])
    if not join:
        return [t for _, t in counted[:per_length]]
    near = [t for distance, t in counted if distance <= max(1, target // 5)][:per_length]
    joined, current = [], []
    for text in texts:
        if len(near) + len(joined) >= per_length:
            break
        current.append(text)
        if count_pieces(" ".join(current)) >= target:
            joined.append(" ".join(current))
            current = []
    return near + joined


def one_sentence_lines(texts: list[str]) -> list[str]:
    """The `texts` our exports' segmenter keeps whole (one segment each), in order: a line of
    several sentences is a batch of searches for us and one sequence for CTranslate2."""
    segments = segment(tf.constant(texts)).segments.row_lengths().numpy()
    return [text for text, n in zip(texts, segments) if n == 1]


def percentiles(times: list[float]) -> dict:
    """p50 and p90 in milliseconds."""
    return {"p50_ms": 1e3 * float(np.percentile(times, 50)),
            "p90_ms": 1e3 * float(np.percentile(times, 90))}  # fmt: skip


def ctranslate2_systems(
    model, spm_path: str, search: SearchOptions, threads: tuple = (None,),
    patiences: tuple = (1.0,),
) -> dict:  # fmt: skip
    """`{name: translate(texts) -> Timed(translations, seconds)}` for CTranslate2 float32 and
    int8, each in a process of its own (`benchmarks.ctranslate2_process`: two translators in
    one process slow each other down), or {} without CTranslate2; outputs of at most source
    + `max_extra_length` pieces (the batch's longest source: CTranslate2 takes one limit a
    batch), within the model's `max_length` positions. `threads`: a pair of workers for each
    `intra_threads` value (None: the machine's cores, named without a tail; n: ", n
    thread(s)"), and for each of `patiences` (CTranslate2's early stop, `translate_batch`'s
    `patience`: an item ends once beam_size * patience hypotheses have finished; 1, its
    default, named without a tail; p: ", patience p")."""
    try:
        import ctranslate2  # noqa: F401
        import sentencepiece  # noqa: F401
    except ImportError:
        return {}
    from benchmarks.ctranslate2_process import Worker
    from keras_transformer.serving.ctranslate2_export import (
        export_ctranslate2,
        sentencepiece_pieces,
    )

    workdir = tempfile.mkdtemp()
    path = export_ctranslate2(model, os.path.join(workdir, "model"), sentencepiece_pieces(spm_path))
    limit = model.config.max_length - 1  # positions 0 .. max_length - 1, BOS at 0
    options = dict(beam_size=search.beam_size, alpha=search.alpha,
                   max_extra_length=search.max_extra_length, limit=limit)  # fmt: skip
    return {f"CTranslate2 {kind}{thread_tail(n)}{patience_tail(p)}":
            Worker(path, spm_path, kind, dict(options, patience=p), n)
            for p in patiences for n in threads for kind in ("float32", "int8")}  # fmt: skip


def patience_tail(patience: float) -> str:
    """A CTranslate2 system's name tail for its patience (1, its default: no tail)."""
    return "" if patience == 1 else f", patience {patience:g}"


def thread_tail(threads: int | None) -> str:
    """A worker system's name tail for its thread count, ours or CTranslate2's (None: the
    cores, no tail)."""
    return "" if threads is None else f", {threads} thread{'s' if threads > 1 else ''}"


def timed_call(system, texts: list[str]) -> tuple[list, float]:
    """`(outputs, seconds)` of one call: the time a system measured itself (`Timed`, a
    CTranslate2 worker), else the wall time around the call."""
    start = time.perf_counter()
    outputs = system(texts)
    if isinstance(outputs, Timed):
        return outputs.outputs, outputs.seconds
    return outputs, time.perf_counter() - start


def our_systems(args, model_dir: str, workdir: str, search: SearchOptions) -> dict:
    """`{name: translate(texts) -> Timed(translations, seconds)}`: the float32 export, with
    XLA, in bfloat16, each in a process of its own per `args.our_threads` (TensorFlow's pools
    at that size, None: the cores, named without a tail; `benchmarks.savedmodel_process`);
    and over gRPC to the test double in this process."""
    from benchmarks.savedmodel_process import Worker
    from keras_transformer.serving import client
    from keras_transformer.serving.export import export_savedmodel

    exports = {}
    for lookahead in args.stop_lookahead:
        options, tail = search.replace(stop_lookahead=lookahead), STOP_NAMES[lookahead]
        exports[f"ours float32{tail}"] = export_savedmodel(
            model_dir, workdir, f"f32{lookahead}", 1, search=options
        )
        if args.xla:
            exports[f"ours float32 XLA{tail}"] = export_savedmodel(
                model_dir, workdir, f"xla{lookahead}", 1, search=options, jit_compile=True
            )
        if args.bfloat16:
            exports[f"ours bfloat16{tail}"] = export_savedmodel(
                model_dir, workdir, f"bf16{lookahead}", 1, search=options, dtype="bfloat16"
            )
        if args.bfloat16 and args.xla:
            exports[f"ours bfloat16 XLA{tail}"] = export_savedmodel(
                model_dir, workdir, f"bf16xla{lookahead}", 1, search=options,
                jit_compile=True, dtype="bfloat16",
            )  # fmt: skip
    plain = f"ours float32{STOP_NAMES[args.stop_lookahead[0]]}"
    systems = {}
    for name, path in exports.items():  # a worker a thread count: TensorFlow sizes its pools once
        systems.update({f"{name}{thread_tail(n)}": Worker(path, n or os.cpu_count())
                        for n in args.our_threads})  # fmt: skip
    if args.grpc:
        from keras_transformer.testing.serving_double import SavedModelPredictionService, serve_grpc

        service = SavedModelPredictionService(exports[plain], model_name="f32")
        server, port = serve_grpc(service)
        address = f"127.0.0.1:{port}"
        systems[f"{plain}, gRPC"] = lambda texts: client.predict_grpc(
            address, texts, model_name="f32"
        )
        systems["_server"] = server
    return systems


def latency_rows(systems: dict, sentences: dict, rounds: int, idle_s: float = 0.0) -> list[dict]:
    """p50/p90 of every system at every length, systems alternating within each round;
    `idle_s` seconds of sleep before each timed request (requests that arrive one by one
    after a pause, as a person's do; 0: each right after the previous system's).

    Each system is first warmed with every sentence once: the XLA export compiles once per
    source width and batch size, and a long sentence may be cut into segments (a batch) of
    its own widths, so warming only some sentences left compiles in the timed requests (a
    p90 of 4.0 s against a p50 of 1.4 s at base: 2026-11-27-issue-54-late-probes.md)."""
    names = [name for name in systems if not name.startswith("_")]
    times = {(name, length): [] for name in names for length in sentences}
    warm = list(dict.fromkeys(text for texts in sentences.values() for text in texts))
    for name in names:
        for text in warm:
            systems[name]([text])
    for round_ in range(rounds):
        for length, texts in sentences.items():
            for text in texts:
                for name in names[:: 1 if round_ % 2 == 0 else -1]:
                    if idle_s:
                        time.sleep(idle_s)
                    times[(name, length)].append(timed_call(systems[name], [text])[1])
    return [dict(system=name, length=length, requests=len(t), **percentiles(t))
            for (name, length), t in times.items()]  # fmt: skip


def throughput_rows(
    systems: dict, texts: list[str], batch: int, rounds: int, count_pieces=None
) -> list[dict]:
    """Sentences/s of every system over all `texts` in batches of `batch` (median of
    `rounds`, systems alternating; a warm-up pass over every batch first), and with
    `count_pieces(list of str) -> int` the output pieces of its last pass and their rate:
    systems that stop at different lengths (random weights, a peer's per-batch length limit)
    do different work."""
    names = [name for name in systems if not name.startswith("_") and "gRPC" not in name]
    chunks = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    seconds = {name: [] for name in names}
    outputs = {name: [] for name in names}
    for name in names:  # every chunk once: an XLA export compiles each new (batch, width)
        for chunk in chunks:
            systems[name](chunk)
    for round_ in range(rounds):
        for name in names[:: 1 if round_ % 2 == 0 else -1]:
            calls = [timed_call(systems[name], chunk) for chunk in chunks]
            seconds[name].append(sum(elapsed for _, elapsed in calls))
            outputs[name] = [text for out, _ in calls for text in out]
    rows = []
    for name, times in seconds.items():
        row = dict(system=name, batch=batch, sentences=len(texts),
                   sentences_per_s=[len(texts) / t for t in times],
                   median=float(np.median([len(texts) / t for t in times])))  # fmt: skip
        if count_pieces is not None:
            texts_out = [t.decode() if isinstance(t, bytes) else str(t) for t in outputs[name]]
            row["output_pieces"] = count_pieces(texts_out)
            row["output_pieces_per_s"] = row["output_pieces"] * row["median"] / len(texts)
        rows.append(row)
    return rows


def profile_rows(
    model, tokenizer, search: SearchOptions, sentences: dict, rounds: int, jit_compile=False
) -> list:
    """Our in-process request timed in parts (median ms): the whole translation, its search
    (ids in, ids out), the encoder alone; string work = whole - search; steps = search -
    encoder, per loop step too. `jit_compile`: the XLA translator of the `--jit-compile`
    export (fixed buffers, sources padded to its width buckets). Loop steps come from the
    growing search's ids (one column a step; the XLA search stops at the same step)."""
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.search import XLA_WIDTH_MULTIPLE, pad_width

    config = model.config
    options = search.replace(padded_decode=jit_compile)
    translator = Translator(model, tokenizer, options, jit_compile=jit_compile)
    whole = graph_function(translator.translate_tensors,
                        input_signature=[tf.TensorSpec([None], tf.string)])  # fmt: skip
    search_fn = translator.search_function(1)
    counter = (  # the growing search, whose ids show its steps
        Translator(model, tokenizer, search.replace(padded_decode=False)).search_function(1)
        if jit_compile
        else search_fn
    )
    encode = graph_function(lambda ids: model.encode(ids),
                         input_signature=[tf.TensorSpec([None, None], tf.int32)])  # fmt: skip
    rows = []
    for length, texts in sentences.items():
        parts = {"whole": [], "search": [], "encoder": []}
        ids = [tokenizer.encode_source(tf.constant([t]), config.max_length).to_tensor()
               for t in texts]  # fmt: skip
        if jit_compile:
            ids = [pad_width(source, XLA_WIDTH_MULTIPLE) for source in ids]
        out_lengths, loop_steps = [], []
        for text, source in zip(texts, ids):  # warm-up (traces each new length once)
            whole(tf.constant([text]))
            search_fn(source)
            encode(source)
            found = counter(source)[0]  # (1, 1, steps + 1)
            loop_steps.append(int(found.shape[-1]) - 1)
            out_lengths.append(int(tf.reduce_sum(tf.cast(found[0, 0, 1:] > 0, tf.int32))))
        for _ in range(rounds):
            for text, source in zip(texts, ids):
                for name, call, arg in (("whole", whole, tf.constant([text])),
                                        ("search", search_fn, source),
                                        ("encoder", encode, source)):  # fmt: skip
                    start = time.perf_counter()
                    call(arg)
                    parts[name].append(time.perf_counter() - start)
        ms = {name: 1e3 * float(np.median(t)) for name, t in parts.items()}
        steps = float(np.mean(loop_steps))
        rows.append(dict(length=length, xla=jit_compile, stop_lookahead=search.stop_lookahead,
                         whole_ms=ms["whole"], string_ms=ms["whole"] - ms["search"],
                         encoder_ms=ms["encoder"], steps_ms=ms["search"] - ms["encoder"],
                         loop_steps=steps, output_pieces=float(np.mean(out_lengths)),
                         per_step_ms=(ms["search"] - ms["encoder"]) / max(steps, 1.0)))  # fmt: skip
    return rows


def print_latency(rows: list[dict]) -> None:
    lengths = sorted({row["length"] for row in rows})
    by = {(row["system"], row["length"]): row for row in rows}
    print("| system | " + " | ".join(f"~{n} pieces p50 / p90 ms" for n in lengths) + " |")
    print("|---|" + "---:|" * len(lengths))
    for system in dict.fromkeys(row["system"] for row in rows):
        cells = [f"{by[system, n]['p50_ms']:.1f} / {by[system, n]['p90_ms']:.1f}" for n in lengths]
        print(f"| {system} | " + " | ".join(cells) + " |")


def print_profile(rows: list[dict]) -> None:
    print("\n| search | source pieces | whole ms | string work | encoder | search steps | "
          "loop steps | output pieces | ms per loop step |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        kind = ("XLA" if r["xla"] else "growing") + STOP_NAMES[r["stop_lookahead"]]
        print(f"| {kind} | ~{r['length']} | {r['whole_ms']:.1f} | {r['string_ms']:.1f} | "
              f"{r['encoder_ms']:.1f} | {r['steps_ms']:.1f} | {r['loop_steps']:.1f} | "
              f"{r['output_pieces']:.1f} | {r['per_step_ms']:.2f} |")  # fmt: skip


def thread_counts(values, flag: str, throughput) -> tuple:
    """Thread counts of one side's workers (None: the machine's cores): `values` of `flag`,
    the cores' count named as None, once; by default latency 1 and the cores (neither is the
    fastest for every model and length, for either system), throughput the cores."""
    if values:
        for n in values:
            if n < 1:
                raise SystemExit(f"{flag} must each be at least 1. Received: {n}")
        cores = os.cpu_count()
        return tuple(dict.fromkeys(None if n == cores else n for n in values))
    return (None,) if throughput or os.cpu_count() == 1 else (1, None)


def peer_threads(args) -> tuple:
    """CTranslate2's `intra_threads` values: `thread_counts` of `--peer-threads`."""
    return thread_counts(args.peer_threads, "--peer-threads", args.throughput)


def our_threads(args) -> tuple:
    """Our workers' TensorFlow pool sizes: `thread_counts` of `--our-threads`."""
    return thread_counts(args.our_threads, "--our-threads", args.throughput)


def main(argv=None, prog: str = "python benchmarks/run.py serving single") -> int:
    parser = flags.parser(prog, __doc__)
    add_model_arguments(parser, parser.add_mutually_exclusive_group())
    parser.add_argument("--per-length", type=int, default=12, help="sentences of each length")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the sentences")
    parser.add_argument("--grpc", action="store_true", help="also through the gRPC test double")
    parser.add_argument("--bfloat16", action="store_true", help="also the bfloat16 export")
    parser.add_argument(
        "--xla", action="store_true", help="also the XLA export (--jit-compile: fixed buffers)"
    )
    parser.add_argument(
        "--stop-lookahead", nargs="+", choices=STOP_LOOKAHEADS, default=["limit"],
        help="our searches' early stopping, one system (and profile) each: limit (exact, the "
        "default) and/or next (one step ahead, like CTranslate2's top-beam exit)",
    )  # fmt: skip
    parser.add_argument("--no-peers", action="store_true", help="without CTranslate2")
    parser.add_argument(
        "--peer-threads", type=int, nargs="+", default=None, metavar="N",
        help="CTranslate2's intra_threads, a float32 and an int8 worker for each (default: "
        "latency 1 and the cores, since neither is CTranslate2's fastest for every model and "
        "length; --throughput the cores)",
    )  # fmt: skip
    parser.add_argument(
        "--peer-patience", type=float, nargs="+", default=[1.0], metavar="P",
        help="CTranslate2's patience, a float32 and an int8 worker for each: an item ends once "
        "beam size * P hypotheses have finished (default 1, CTranslate2's own). Larger P "
        "searches closer to CTranslate2's own search run to the length limit "
        "(benchmarks/results/2026-12-02-issue-54-ctranslate2-stop.md)",
    )  # fmt: skip
    parser.add_argument(
        "--our-threads", type=int, nargs="+", default=None, metavar="N",
        help="TensorFlow's intra-op and inter-op pools of our exports (TF Serving's "
        "--tensorflow_intra_op_parallelism and --tensorflow_inter_op_parallelism), a process "
        "for each N (default: latency 1 and the cores, --throughput the cores; as for "
        "--peer-threads, since neither is ours' fastest for every model and export)",
    )  # fmt: skip
    parser.add_argument(
        "--idle-ms", type=float, default=0.0,
        help="latency: sleep this long before each timed request (requests after a pause, as "
        "a person sends them; default 0: each right after the previous system's)",
    )  # fmt: skip
    parser.add_argument(
        "--max-extra-length", type=int, default=SearchOptions.max_extra_length, metavar="N",
        help="outputs of at most source + N pieces, ours and CTranslate2's alike (default: the "
        "paper's 50). With --untrained, whose random weights run every output to its limit, "
        "a small N stands in for a trained model's output lengths; it also shortens our XLA "
        "export's buffers (benchmarks/results/2026-11-29-issue-54-one-thread-split.md)",
    )  # fmt: skip
    parser.add_argument("--profile", action="store_true", help="split our request's time")
    parser.add_argument(
        "--throughput", type=int, default=None, metavar="BATCH",
        help="instead of latency: sentences/s of each system over the first --sentences test "
        "sentences in batches of BATCH",
    )  # fmt: skip
    parser.add_argument(
        "--sentences", type=int, default=1288,
        help="with --throughput: the first N test lines that are one sentence each (a line "
        "of several we split into sentences, each with its own output limit, and CTranslate2 "
        "searches whole: different work)",
    )  # fmt: skip
    parser.add_argument(
        "--cpu-isa", choices=sorted(machine.ISA_CAPS), default="native",
        help="cap oneDNN and CTranslate2 to this instruction set (avx2: a CPU without AVX-512 "
        "and bfloat16 units)",
    )  # fmt: skip
    parser.add_argument("--output", default=None, help="JSON file for the results")
    args = parser.parse_args(argv)
    if args.idle_ms < 0:
        parser.error(f"--idle-ms must be at least 0. Received: {args.idle_ms}")
    if args.max_extra_length < 0:
        parser.error(f"--max-extra-length must be at least 0. Received: {args.max_extra_length}")
    if min(args.peer_patience) * SearchOptions.beam_size < 0.5:  # CTranslate2 rounds it
        parser.error(f"--peer-patience must be at least {0.5 / SearchOptions.beam_size:g} (one "
                     f"finished hypothesis at beam {SearchOptions.beam_size}). Received: "
                     f"{args.peer_patience}")  # fmt: skip
    threads = peer_threads(args)  # both checked before anything runs
    args.our_threads = our_threads(args)
    machine.cap_cpu_isa(args.cpu_isa)  # before any product runs
    args.export_dir = None  # serving_benchmark.environment reads it
    with tempfile.TemporaryDirectory() as workdir:
        model_dir = model_dir_for(args, workdir)
        search = SearchOptions(
            alpha=artifacts.run_eval_alpha(model_dir), max_extra_length=args.max_extra_length
        )
        model, _, tokenizer = artifacts.load_trained(model_dir)
        texts = [src for src, _ in read_pairs("sample_en_de", "test")]

        def count_pieces(text):
            return int(tokenizer.tokenize(tf.constant([text])).row_lengths()[0])

        texts = one_sentence_lines(texts)  # one sentence a request, for both modes
        sentences = {n: pick_sentences(texts, count_pieces, n, args.per_length, join=False)
                     for n in LENGTHS}  # fmt: skip
        systems = our_systems(args, model_dir, workdir, search)
        if not args.no_peers:
            spm = artifacts.path(model_dir, artifacts.TOKENIZER_FILE)
            systems.update(ctranslate2_systems(model, spm, search, threads, args.peer_patience))
        if args.throughput:
            rows = throughput_rows(
                systems, texts[: args.sentences], args.throughput, args.rounds,
                lambda out: int(tokenizer.tokenize(tf.constant(out)).row_lengths().numpy().sum()),
            )  # fmt: skip
        else:
            rows = latency_rows(systems, sentences, args.rounds, args.idle_ms / 1e3)
        if "_server" in systems:
            systems["_server"].stop(grace=None)
        profile = []
        for lookahead in args.stop_lookahead if args.profile else ():
            for jit in (False, True) if args.xla else (False,):
                options = search.replace(stop_lookahead=lookahead)
                profile += profile_rows(model, tokenizer, options, sentences, args.rounds, jit)
    if args.throughput:
        base = next((r["median"] for r in rows if r["system"] == "CTranslate2 float32"), None)
        pieces = next((r["output_pieces_per_s"] for r in rows
                       if r["system"] == "CTranslate2 float32"), None)  # fmt: skip
        print("| system | batch | sentences/s | vs CTranslate2 float32 | output pieces | "
              "output pieces/s | vs CTranslate2 float32 |")  # fmt: skip
        print("|---|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            ratio = f"{r['median'] / base:.2f}x" if base else "-"
            per_piece = f"{r['output_pieces_per_s'] / pieces:.2f}x" if pieces else "-"
            print(
                f"| {r['system']} | {r['batch']} | {r['median']:.2f} | {ratio} | "
                f"{r['output_pieces']} | {r['output_pieces_per_s']:.1f} | {per_piece} |"
            )
    else:
        print_latency(rows)
    if profile:
        print_profile(profile)
    report = dict(command=" ".join([sys.executable, *sys.argv]), search=search.__dict__,
                  lengths={n: [count_pieces(t) for t in s] for n, s in sentences.items()},
                  rows=rows, profile=profile, idle_ms=args.idle_ms,
                  peer_threads=[n or os.cpu_count() for n in threads],
                  peer_patience=args.peer_patience,
                  our_threads=[n or os.cpu_count() for n in args.our_threads],
                  **environment(args))  # fmt: skip
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    return 0
