"""Issue 54 on an AMX Xeon: of the rows the default (exact-stop) search of the batch-64
workload computes, how many could still change a result, and what a step of the tail (one
item, 4 rows) spends its time on.

    PYTHONPATH=. python benchmarks/results/2026-12-01-issue-54-amx-idle-rows.py RUN OUT.json

1. The 4 batches of 64 of `serving single --throughput 64` (`...-amx-batch64-ops.batches`),
   beam search with the run's alpha and the `limit` stop, eagerly (`search.translate_ids`),
   float32. After every step each live row is one of: a beam of an item that is already done
   (its results are final; its rows wait for the loop's next drop, `loop.SHRINK_THRESHOLD`),
   a dead beam (log P = -inf: fewer live extensions than beams; the first step's three
   copies of beam 0 are computed before any state is counted, so not here), a hopeless beam
   of an item still searching (its best reachable score, log P / lp(limit), is below the
   item's n-best-th finished score: no descendant can enter the results), or a useful beam.
   Counted from the strategy's state after each `BeamSearch.advance` (wrapped here only): the
   rows the next step computes.
2. TensorFlow's profiler over 3 forced searches (`decode_benchmark.forced_search`, 40 steps,
   EOS masked out) of 1 source of 24 random ids, bfloat16: ops' self-time a step by op type.
3. One bfloat16 `(rows, 512) x (512, 2048)` product, 50 times in a `tf.while_loop`, its weights
   a variable against a graph constant (which oneDNN may keep in its packed layout): us a
   product, medians of 7 alternated rounds, at 4, 64 and 256 rows.
"""

import collections
import json
import sys
import time

from keras_transformer import malloc, onednn

onednn.prefer_onednn()  # as the commands do

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import machine  # noqa: E402
from benchmarks.dated import script  # noqa: E402
from benchmarks.decode_benchmark import forced_search  # noqa: E402
from keras_transformer import SearchOptions, artifacts  # noqa: E402
from keras_transformer.decoding import beam_search  # noqa: E402
from keras_transformer.decoding.search import translate_ids  # noqa: E402

batch64 = script("2026-12-01-issue-54-amx-batch64-ops.py")
KINDS = ("done", "dead", "hopeless", "useful")


def classify(strategy, state, step, limits) -> collections.Counter:
    """Counts of the `KINDS` of the live rows of `state` (numpy, eager) after `step` tokens."""
    log_p = state.alive_log_probs.numpy()  # (active, beam)
    worst = state.finished_scores[:, strategy.n_best - 1].numpy()[:, None]  # (active, 1)
    done = strategy.item_done(state, step, limits).numpy()[:, None]  # (active, 1)
    bound = beam_search.best_penalty(step, limits, strategy.alpha, "limit").numpy()[:, None]
    dead = ~np.isfinite(log_p)
    hopeless = log_p / bound < worst
    kinds = {
        "done": done & np.ones_like(dead),
        "dead": ~done & dead,
        "hopeless": ~done & ~dead & hopeless,
        "useful": ~done & ~dead & ~hopeless,
    }
    return collections.Counter({k: int(v.sum()) for k, v in kinds.items()})


def idle_rows(run: str) -> dict:
    model, _, _ = artifacts.load_trained(run)
    options = SearchOptions(alpha=artifacts.run_eval_alpha(run), stop_lookahead="limit")
    counts, steps = collections.Counter(), 0
    advance = beam_search.BeamSearch.advance

    def counted(self, state, logits, at, loop):
        nonlocal steps
        new_state, rows = advance(self, state, logits, at, loop)
        counts.update(classify(self, new_state, at.step + 1, at.limits))
        steps += 1
        return new_state, rows

    beam_search.BeamSearch.advance = counted
    try:
        for source in batch64.batches(run):
            translate_ids(model, source, options)
    finally:
        beam_search.BeamSearch.advance = advance
    total = sum(counts.values())
    report = {"alpha": options.alpha, "loop_steps": steps, "row_steps": total}
    report.update({k: {"rows": counts[k], "share": counts[k] / total} for k in KINDS})
    return report


def tail_profile(run: str, rounds: int = 3, steps: int = 40, items: int = 1) -> dict:
    model, config, _ = artifacts.load_trained(run, dtype="bfloat16")
    source = tf.constant(np.random.RandomState(0).randint(4, 32000, (items, 24)), tf.int32)
    search = forced_search(model, config, 4, steps)
    search(source).numpy()
    _, rows = batch64.step_ops.profile(lambda: [search(source).numpy() for _ in range(rounds)])
    per = rounds * steps  # the encoder (once a search) is spread over the steps
    by_type = batch64.step_ops.summed(rows, lambda r: r["type"])  # (type, ms, count), largest first
    return {
        "ms_a_step": sum(ms for _, ms, _ in by_type) / per,
        "ops_a_step": sum(n for _, _, n in by_type) / per,
        "by_type": {
            k: {"ms_a_step": ms / per, "a_step": n / per, "us_each": 1e3 * ms / n}
            for k, ms, n in by_type[:12]
        },
    }


def repeated(fn, repeats: int):
    """A `tf.function` running `fn` on a new input (`x + 0 * i`) `repeats` times in one
    `tf.while_loop`, one iteration at a time; it sums one column of each float output."""

    @tf.function
    def run(x):
        def body(i, acc):
            y = fn(x + tf.cast(i, x.dtype) * 0)
            return i + 1, acc + tf.reduce_sum(tf.cast(y[:, :1], tf.float32))

        return tf.while_loop(lambda i, _: i < repeats, body, (0, 0.0), parallel_iterations=1)[1]

    return run


def alternated_us(fns: dict, x, repeats: int = 50, rounds: int = 7) -> dict:
    """us a call of each of `fns` on `x`: `repeated` loops alternated round by round, medians."""
    runs = {k: repeated(fn, repeats) for k, fn in fns.items()}
    times = {k: [] for k in runs}
    for run in runs.values():
        run(x).numpy()
    for _ in range(rounds):
        for k, run in runs.items():
            start = time.perf_counter()
            run(x).numpy()
            times[k].append((time.perf_counter() - start) / repeats * 1e6)
    return {k: float(np.median(v)) for k, v in times.items()}


def constant_weights() -> dict:
    rng = np.random.RandomState(0)
    weights = tf.cast(rng.randn(512, 2048).astype(np.float32) * 0.02, tf.bfloat16)
    kinds = {"variable": tf.Variable(weights), "constant": tf.constant(weights)}
    report = {}
    for rows in (4, 64, 256):
        x = tf.cast(rng.randn(rows, 512).astype(np.float32), tf.bfloat16)
        products = {k: lambda x, w=w: tf.matmul(x, w) for k, w in kinds.items()}
        report[rows] = alternated_us(products, x)
    return report


def main(run: str, out: str) -> None:
    malloc.keep_freed_memory()
    report = {"machine": machine.description(), "tensorflow": tf.__version__}
    report["idle_rows"] = idle_rows(run)
    print(json.dumps(report["idle_rows"], indent=1), flush=True)
    report["tail_profile"] = tail_profile(run)
    print(json.dumps(report["tail_profile"], indent=1), flush=True)
    report["constant_weights_us"] = constant_weights()
    print(json.dumps(report["constant_weights_us"], indent=1), flush=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:3])
