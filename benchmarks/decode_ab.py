"""A/B of beam-search designs in one process: the same model, sources and forced lengths,
each design traced once, then timed in alternating rounds (every other round in reverse
order), so that load on a shared machine hits all of them alike.

    python benchmarks/run.py decode ab --cpu-isa avx2 --batch 32 --lengths 32
    python benchmarks/run.py decode ab --cpu-isa avx2 --batch 8 --lengths 16,64,256 \\
        --designs rows,rows+T,slots,slots@8,slots@32 --json /tmp/ab.json
    python benchmarks/run.py decode ab --dtype bfloat16 --designs slots --profile 15

Designs (what `translator` decoded with before and after issue 40):
    rows      the cache has a row per hypothesis, `(batch * beam, h, t, d)`, grown by one
              concatenation and reordered by one gather per step (two copies of it per step);
              encoder-decoder keys/values tiled by beam; the output projection transposes
              the embedding matrix at every step.
    rows+T    the same, with the output projection's kernel transposed once per search.
    slots     the default: a per-source cache that is never reordered
              (`layers.slot_cache`), encoder-decoder keys/values read by the beams of a
              source together, the kernel transposed once. `slots@R` merges the recent
              part of the cache every R steps (default `incremental.RECENT_POSITIONS`);
              `slots:transpose` groups rows by source with transposes instead of gathers
              (`multi_head_attention.swap_blocks`).
    +P        (a suffix, e.g. `slots+P`) the decoder's kernels copied once per search into
              buffers with rows 16 floats wider (`layers.padded_dense`); without it,
              Keras' kernels. The commands decide by CPU (`onednn.padded_kernels_faster`).

Reports output tokens/s (sources x forced steps / s), the speed relative to the first design
(the median over rounds of each round's ratio, robust to load that drifts between rounds), the
cost per token relative to the shortest length, and whether each design's ids equal the first
design's (scores: the largest difference).
"""

from __future__ import annotations

import os
import statistics
import time

from benchmarks import flags, machine


def parse_args(argv, prog: str | None = None):
    parser = flags.parser(prog, __doc__)
    flags.add(parser, config={"default": "base", "choices": ("base", "tiny", "quick")},
              vocab_size={"default": 32000, "help": "shared vocabulary"},
              batch={"default": 32, "help": "sources per batch"},
              length={"default": 32, "help": "source tokens"}, repeats=5,
              json={"help": "write the results here"})  # fmt: skip
    parser.add_argument("--lengths", default="32", help="forced output lengths, comma-separated")
    parser.add_argument("--designs", default="rows,rows+T,slots", help="comma-separated, see above")
    parser.add_argument("--beam", type=int, default=4, help="beam width")
    parser.add_argument(
        "--dtype", choices=("float32", "bfloat16"), default="float32",
        help="the model's weights and compute (bfloat16: as `translate --dtype bfloat16`)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N",
        help="also trace one search of each design (TF profiler) and print its N op types "
        "with the most time, in ms per step (summed over threads)",
    )  # fmt: skip
    parser.add_argument(
        "--cpu-isa", choices=sorted(machine.ISA_CAPS), default="native",
        help="avx2: cap oneDNN and MKL to AVX2 (a CPU without AVX-512 or bfloat16 units)",
    )  # fmt: skip
    return parser.parse_args(argv)


def _design(name: str):
    """`(cache kind, pretransposed output kernel, recent positions or None, swap by gather,
    padded decoder kernels)` of a name."""
    kernels = name.endswith("+P")
    name = name.removesuffix("+P")
    name, _, swap = name.partition(":")
    name, _, recent = name.partition("@")
    if name not in ("rows", "rows+T", "slots"):
        raise ValueError(f"Unknown design {name!r}: expected rows, rows+T or slots[@R]")
    cache = "rows" if name.startswith("rows") else "slots"
    return cache, name != "rows", int(recent) if recent else None, swap != "transpose", kernels


def _trace(design: str, model, steps: int, beam: int, source):
    """Build and trace (first call) the design's search: `(search, first result)`."""
    from benchmarks.decode_benchmark import forced_search
    from keras_transformer.decoding import incremental
    from keras_transformer.layers import multi_head_attention

    cache, pretransposed, recent, by_gather, kernels = _design(design)
    incremental.PRETRANSPOSE_OUTPUT = pretransposed  # read while tracing
    incremental.PAD_KERNELS = kernels
    incremental.RECENT_POSITIONS = recent or incremental.DEFAULT_RECENT_POSITIONS
    multi_head_attention.SWAP_BY_GATHER = by_gather
    try:
        search = forced_search(model, model.config, beam, steps, cache=cache, scores=True)
        return search, [t.numpy() for t in search(source)]
    finally:
        incremental.PRETRANSPOSE_OUTPUT = True
        incremental.PAD_KERNELS = None
        incremental.RECENT_POSITIONS = incremental.DEFAULT_RECENT_POSITIONS
        multi_head_attention.SWAP_BY_GATHER = True


def op_times(search, source, steps: int, top: int) -> list[tuple[str, float, int]]:
    """`(op type, ms per step summed over threads, count)` of the `top` op types in a TF
    profiler trace of one call of `search`."""
    import collections
    import glob
    import tempfile

    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        search(source)[0].numpy()
        tf.profiler.experimental.stop()
        (path,) = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
        space = xplane_pb2.XSpace.FromString(open(path, "rb").read())
    seconds, counts = collections.Counter(), collections.Counter()
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                name = names.get(event.metadata_id, "")
                op = name.rsplit(":", 1)[-1]  # "layer/name:OpType"
                if ":" in name and not name.startswith("$") and op not in ("Process", "Run"):
                    seconds[op] += event.duration_ps / 1e12
                    counts[op] += 1
    return [(op, s / steps * 1e3, counts[op]) for op, s in seconds.most_common(top)]


def run(args) -> dict:
    machine.cap_cpu_isa(args.cpu_isa)
    import numpy as np
    import tensorflow as tf

    from benchmarks.peers import ours
    from benchmarks.peers.spec import Spec, decode_sources

    lengths = [int(n) for n in args.lengths.split(",")]
    designs = args.designs.split(",")
    spec = Spec(config=args.config, vocab_size=args.vocab_size, batch=args.batch,
                length=args.length, out_length=max(lengths), steps=1)  # fmt: skip
    model = ours.build_model(spec)
    if args.dtype == "bfloat16":
        model = ours.bfloat16_copy(model)
    source = tf.constant(decode_sources(spec))
    searches, first = {}, {}
    for design in designs:
        for n in lengths:
            searches[design, n], first[design, n] = _trace(design, model, n, args.beam, source)
    seconds = {key: [] for key in searches}
    for round_ in range(args.repeats):
        order = list(searches) if round_ % 2 == 0 else list(searches)[::-1]
        for key in order:
            start = time.perf_counter()
            searches[key](source)[0].numpy()
            seconds[key].append(time.perf_counter() - start)
    rows = []
    for design in designs:
        shortest = statistics.median(seconds[design, lengths[0]]) / lengths[0]  # s per token
        for n in lengths:
            median = statistics.median(seconds[design, n])
            ref_ids, ref_scores = first[designs[0], n]
            ids, scores = first[design, n]
            rows.append({
                "design": design, "length": n, "seconds": median,
                "tokens_per_s": args.batch * n / median,
                "speed_vs_first": statistics.median(
                    a / b for a, b in zip(seconds[designs[0], n], seconds[design, n])
                ),  # the median of each round's ratio: load drifts between rounds
                "cost_vs_shortest": median / n / shortest,
                "runs": seconds[design, n],
                "ids_equal_first": bool(np.array_equal(ids, ref_ids)),
                "max_score_diff": float(np.max(np.abs(scores - ref_scores))),
            })  # fmt: skip
    profiles = {}
    if args.profile:
        for (design, n), search in searches.items():
            profiles[f"{design} @ {n}"] = op_times(search, source, n, args.profile)
    from benchmarks.peers import report

    environment = report.environment(args.prog, args.argv, "default")
    return {"rows": rows, "profiles": profiles, **environment, "args": vars(args)}


def markdown(result: dict) -> str:
    from benchmarks.peers import report

    lines = [
        *report.header(result), "",
        "| design | output tokens | output tokens/s (median) | speed vs the first design "
        "| cost per token vs shortest | each run (s) | ids equal the first design's "
        "| max score difference |",
        "|---|---:|---:|---:|---:|---|---|---:|",
    ]  # fmt: skip
    for row in result["rows"]:
        runs = ", ".join(f"{s:.3f}" for s in row["runs"])
        lines.append(
            f"| {row['design']} | {row['length']} | {row['tokens_per_s']:.1f} | "
            f"{row['speed_vs_first']:.3f} | "
            f"{row['cost_vs_shortest']:.3f} | {runs} | {row['ids_equal_first']} | "
            f"{row['max_score_diff']:.2g} |"
        )
    for name, ops in result.get("profiles", {}).items():
        lines += ["", f"Trace of {name} tokens (op types: ms a step, summed over threads; count):"]
        lines += [f"    {op:28s} {ms:8.2f}  {count}" for op, ms, count in ops]
    return "\n".join(lines)


def main(argv, prog: str = "python benchmarks/run.py decode ab"):
    args = parse_args(argv, prog)
    args.prog, args.argv = prog, list(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    result = run(args)
    print(markdown(result))
    flags.write_json(result, args.json)
    return result
