"""Decoding speed of the cached incremental decoder: output tokens/s against batch size and
output length, and the time of each step against its index, cached versus an uncached
decoder re-run over the whole prefix.

    python benchmarks/run.py decode sweep --preset tiny --output-dir benchmarks/results

Every run forces its number of steps (EOS is masked out), so all hypotheses have the same
length. Output tokens/s = sources x steps / wall time (one output per source, whatever the
beam). Weights are random: speed does not depend on them. Writes decode_benchmark.json,
decode_benchmark.md and decode_benchmark.png to --output-dir.
"""

from __future__ import annotations

import json
import os
import platform
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import flags, machine  # noqa: E402
from keras_transformer import SearchOptions, TransformerConfig, build_transformer  # noqa: E402
from keras_transformer.decoding import (  # noqa: E402
    BeamSearch,
    LoopOptions,
    Sampling,
    StepFunction,
    decode,
    fixed_shape_step,
    padded_kernels,  # noqa: E402
    per_source_step,
)
from keras_transformer.tracing import graph_function  # noqa: E402


def parse_args(argv, prog: str | None = None):
    parser = flags.parser(prog, __doc__)
    parser.add_argument("--preset", default="tiny", help="tiny | base | big (default: tiny)")
    flags.add(parser, vocab_size=8000)
    parser.add_argument("--source-length", type=int, default=24, help="source tokens")
    parser.add_argument("--beam-size", type=int, default=4, help="beam width")
    parser.add_argument("--batch-sizes", default="1,8,32,64", help="comma-separated")
    parser.add_argument("--batch-steps", type=int, default=32, help="steps of the batch sweep")
    parser.add_argument("--lengths", default="16,32,64,128", help="forced output lengths")
    parser.add_argument("--length-batch", type=int, default=8, help="batch of the length sweep")
    parser.add_argument("--step-rows", type=int, default=32, help="rows of the per-step timing")
    parser.add_argument("--step-count", type=int, default=128, help="steps of per-step timing")
    flags.add(parser, repeats=3, output_dir=flags.RESULTS_DIR)
    return parser.parse_args(argv)


def forced_search(model, config, beam_size, steps):
    """A tf.function: source ids (batch, src_len) -> ids (batch, beam, 1 + steps), BOS
    first, of a beam search (greedy for beam 1) of exactly `steps`, with the per-source
    cache that `translator` decodes with (`incremental.per_source_step`)."""
    no_eos = tf.one_hot(config.eos_id, config.vocab_size, on_value=float("-inf"))  # (vocab,)
    pad = padded_kernels.default_pad_kernels()  # as the commands decide

    @graph_function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def run(source):
        memory, mask = model.encode(source)
        step = per_source_step(model, memory, mask, beam_size, pad_kernels=pad)

        def forced(ids, t, state, shared):
            logits, state = step.fn(ids, t, state, shared)
            return logits + no_eos, state  # EOS impossible: exactly `steps` steps

        bos = tf.fill(tf.shape(source)[:1], config.bos_id)
        loop = LoopOptions(config.eos_id, config.pad_id)
        strategy = (
            Sampling()
            if beam_size == 1
            else BeamSearch(config.vocab_size, SearchOptions(beam_size=beam_size))
        )  # alpha 0.6; fmt: skip
        forced_step = StepFunction(forced, step.cache, step.shared, step.reorder_cache)
        ids, _ = decode(strategy, forced_step, bos, steps, loop)
        return ids

    return run


def median_time(fn, repeats):
    fn()  # trace / warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def throughput(model, config, args, batch, steps, beam):
    shape = (batch, args.source_length)
    source = tf.constant(np.random.default_rng(0).integers(4, config.vocab_size, shape), tf.int32)
    run = forced_search(model, config, beam, steps)
    seconds = median_time(lambda: run(source).numpy(), args.repeats)
    return {"batch": batch, "steps": steps, "beam": beam, "seconds": seconds,
            "tokens_per_s": batch * steps / seconds}  # fmt: skip


def per_step_times(model, config, args):
    """Seconds of step t for: the growing cache, the fixed-size cache, the uncached re-run."""
    rows, count = args.step_rows, args.step_count
    rng = np.random.default_rng(1)
    source = tf.constant(rng.integers(4, config.vocab_size, (rows, args.source_length)), tf.int32)
    tokens = tf.constant(rng.integers(4, config.vocab_size, (rows, count)), tf.int32)
    memory, mask = model.encode(source)
    decoder, embedding = model.decoder, model.token_embedding

    @graph_function(reduce_retracing=True)
    def uncached(prefix):  # the whole decoder over the prefix, keep the last position
        hidden = decoder(embedding(prefix), memory, memory_mask=mask)
        return embedding(hidden[:, -1:], reverse=True)

    results = {}
    for name, buffer in (("growing cache", None), ("fixed-size cache", count), ("uncached", 0)):
        if buffer != 0:  # already a tf.function (reduce_retracing) when built eagerly
            step = (
                per_source_step(model, memory, mask, 1)
                if buffer is None
                else fixed_shape_step(model, memory, mask, buffer)
            )
            initial_cache = step.cache
        timings = np.zeros((args.repeats + 1, count))
        for r in range(args.repeats + 1):  # run 0 traces
            cache = initial_cache if buffer != 0 else None
            for t in range(count):
                start = time.perf_counter()
                if buffer == 0:
                    uncached(tokens[:, : t + 1]).numpy()
                else:
                    ids = tokens if buffer else tokens[:, : t + 1]
                    logits, cache = step.fn(ids, tf.constant(t), cache, step.shared)
                    logits.numpy()
                timings[r, t] = time.perf_counter() - start
        results[name] = np.median(timings[1:], axis=0).tolist()
    return results


def environment(prog, argv):
    return {"cpu": machine.cpu_name(), "cores": os.cpu_count(),
            "python": platform.python_version(), "tensorflow": tf.__version__,
            "keras": keras.__version__, "command": flags.command(prog, argv)}  # fmt: skip


def markdown(report):
    lines = [f"Model: {report['model']}", ""]
    for title, key in (("Output tokens/s vs batch size", "by_batch"),
                       ("Output tokens/s vs forced output length", "by_length")):  # fmt: skip
        lines += [f"### {title}", "", "| batch | steps | beam | seconds | tokens/s |",
                  "|---:|---:|---:|---:|---:|"]  # fmt: skip
        lines += [f"| {r['batch']} | {r['steps']} | {r['beam']} | {r['seconds']:.3f} | "
                  f"{r['tokens_per_s']:.0f} |" for r in report[key]]  # fmt: skip
        lines.append("")
    lines += ["### Milliseconds per step (median), by step index", "",
              "| step | " + " | ".join(report["per_step"]) + " |",
              "|---:|" + "---:|" * len(report["per_step"])]  # fmt: skip
    count = len(next(iter(report["per_step"].values())))
    for t in sorted({0, 1, 3, 7, 15, 31, 63, 127, count - 1} & set(range(count))):
        cells = " | ".join(f"{1e3 * v[t]:.2f}" for v in report["per_step"].values())
        lines.append(f"| {t} | {cells} |")
    return "\n".join(lines) + "\n"


def plot(report, path):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(12, 3.8), layout="constrained")
    ax_batch, ax_length, ax_step = figure.subplots(1, 3)
    for ax, key, x in ((ax_batch, "by_batch", "batch"), (ax_length, "by_length", "steps")):
        for beam in sorted({r["beam"] for r in report[key]}):
            rows = [r for r in report[key] if r["beam"] == beam]
            label = "greedy" if beam == 1 else f"beam {beam}"
            ax.plot([r[x] for r in rows], [r["tokens_per_s"] for r in rows], "o-", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size" if x == "batch" else "forced output length")
        ax.set_ylabel("output tokens / s")
        ax.legend()
    for name, seconds in report["per_step"].items():
        ax_step.plot(1e3 * np.asarray(seconds), label=name)
    ax_step.set_xlabel("step index")
    ax_step.set_ylabel("ms per step (median)")
    ax_step.legend()
    figure.suptitle(report["model"], fontsize=9)
    figure.savefig(path, dpi=110)


def main(argv, prog: str = "python benchmarks/run.py decode sweep"):
    args = parse_args(argv, prog)
    keras.utils.set_random_seed(0)
    config = TransformerConfig.preset(args.preset, args.vocab_size, dropout=0.0, max_length=512)
    model = build_transformer(config)
    report = {"environment": environment(prog, argv), "model": f"{args.preset} preset, "
              f"{model.count_params() / 1e6:.1f}M parameters, vocab {args.vocab_size}, "
              f"source length {args.source_length}, growing cache, tf.function"}  # fmt: skip
    batches = [int(b) for b in args.batch_sizes.split(",")]
    lengths = [int(n) for n in args.lengths.split(",")]
    report["by_batch"] = [throughput(model, config, args, b, args.batch_steps, beam)
                          for beam in (1, args.beam_size) for b in batches]  # fmt: skip
    report["by_length"] = [throughput(model, config, args, args.length_batch, n, beam)
                           for beam in (1, args.beam_size) for n in lengths]  # fmt: skip
    report["per_step"] = per_step_times(model, config, args)
    os.makedirs(args.output_dir, exist_ok=True)
    base = os.path.join(args.output_dir, "decode_benchmark")
    with open(base + ".json", "w") as f:
        json.dump(report, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(markdown(report))
    plot(report, base + ".png")
    print(markdown(report))
