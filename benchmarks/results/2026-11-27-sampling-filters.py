"""`sample_tensors(..., "sample")` with another checkout's `filter_logits` (before: one sort
of every row at every step) against this one's, in one process: each translator traced with
its filter, then calls alternated; the default run's model, XLA and plain searches, the
`--knobs` (top_k,top_p pairs), batches of 1 and 4 sentences of the test split, seed 1;
medians. Then (unless `--no-filters-alone`) the filter alone on `(4, vocab)` logits
(vocabularies of 4000 and 32000), both versions, XLA and plain.

    git worktree add /tmp/before 6167aa3
    python benchmarks/results/2026-11-27-sampling-filters.py RUN /tmp/before
    python benchmarks/results/2026-11-27-sampling-filters.py RUN /tmp/before \
        --knobs 0,1 8,1 --no-filters-alone      # 2026-11-27-sampling-filters-off.md
"""

import argparse
import gzip
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from keras_transformer.artifacts import load_trained
from keras_transformer.decoding import sampling
from keras_transformer.serving.export import make_translator

TEST = Path(__file__).resolve().parents[2] / "keras_transformer/data/sample/en_de.test.tsv.gz"


def old_filter(root: str):
    spec = importlib.util.spec_from_file_location(
        "sampling_before", f"{root}/keras_transformer/decoding/sampling.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["sampling_before"] = module
    spec.loader.exec_module(module)
    return lambda logits, top_k=0, top_p=1.0, bisect=False: module.filter_logits(
        logits, top_k, top_p
    )  # always the sort


def traced(model, tokenizer, jit: bool, knobs, texts, filter_function):
    """A `sample_tensors` function, traced (and compiled) now with `filter_function`."""
    translator = make_translator(model, tokenizer, jit_compile=jit)
    top_k, top_p = knobs
    function = tf.function(
        lambda t: translator.sample_tensors(t, "sample", top_k=top_k, top_p=top_p, seed=1),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    kept = sampling.filter_logits
    sampling.filter_logits = filter_function
    try:
        for batch in texts:
            function(tf.constant(batch))
    finally:
        sampling.filter_logits = kept
    return function


def main(run: str, before: str, knob_pairs, rounds: int = 30) -> None:
    model, _, tokenizer = load_trained(run)
    lines = gzip.open(TEST, "rt", encoding="utf-8").read().splitlines()
    rows = [line.split("\t")[0] for line in lines]
    rows = [r for r in rows if 5 <= len(r.split()) <= 12]
    texts = [rows[:1], rows[1:5]]
    old = old_filter(before)
    print("| search | top_k, top_p | sentences | before (ms) | after (ms) | before / after | "
          "same |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---|")
    for jit in (True, False):
        for knobs in knob_pairs:
            functions = {
                "before": traced(model, tokenizer, jit, knobs, texts, old),
                "after": traced(model, tokenizer, jit, knobs, texts, sampling.filter_logits),
            }
            for batch in texts:
                times, outs = {name: [] for name in functions}, {}
                for r in range(rounds):
                    order = list(functions.items())
                    for name, function in order if r % 2 == 0 else order[::-1]:
                        start = time.perf_counter()
                        out = function(tf.constant(batch))["translations"].numpy().tolist()
                        times[name].append(time.perf_counter() - start)
                        outs[name] = out
                b, a = np.median(times["before"]), np.median(times["after"])
                same = "yes" if outs["before"] == outs["after"] else "no"
                search = "XLA" if jit else "plain"
                print(f"| {search} | {knobs[0]}, {knobs[1]} | {len(batch)} | {b * 1e3:.1f} | "
                      f"{a * 1e3:.1f} | {b / a:.2f}x | {same} |", flush=True)  # fmt: skip


def filters_alone(old, rounds: int = 200) -> None:
    print("\n| vocabulary | search | top_k, top_p | before (ms) | after (ms) | before / after |"
          " same |")  # fmt: skip
    print("|---:|---|---|---:|---:|---:|---|")
    for vocab in (4000, 32000):
        logits = tf.random.stateless_normal([4, vocab], seed=[3, 4]) * 3
        for jit in (True, False):
            for k, p in ((8, 1.0), (0, 0.9), (40, 0.95)):
                knobs = (tf.constant(k), tf.constant(p))
                functions = {
                    "before": tf.function(old, jit_compile=jit),
                    "after": tf.function(
                        lambda x, k, p, b=jit: sampling.filter_logits(x, k, p, b), jit_compile=jit
                    ),  # bisection under XLA, the sort outside
                }
                outs = {name: f(logits, *knobs).numpy() for name, f in functions.items()}
                times = {name: [] for name in functions}
                for r in range(rounds):
                    order = list(functions.items())
                    for name, function in order if r % 2 == 0 else order[::-1]:
                        start = time.perf_counter()
                        function(logits, *knobs).numpy()
                        times[name].append(time.perf_counter() - start)
                b, a = np.median(times["before"]), np.median(times["after"])
                same = "yes" if np.array_equal(outs["before"], outs["after"]) else "no"
                search = "XLA" if jit else "plain"
                print(f"| {vocab} | {search} | {k}, {p} | {b * 1e3:.2f} | {a * 1e3:.2f} | "
                      f"{b / a:.2f}x | {same} |", flush=True)  # fmt: skip


def knob_pair(text: str) -> tuple[int, float]:
    top_k, top_p = text.split(",")
    return int(top_k), float(top_p)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="trained model directory")
    parser.add_argument("before", help="checkout whose decoding/sampling.py is 'before'")
    pairs = [(8, 1.0), (0, 0.9), (40, 0.95)]
    parser.add_argument("--knobs", nargs="+", type=knob_pair, default=pairs, help="top_k,top_p")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--no-filters-alone", action="store_true")
    args = parser.parse_args()
    main(args.run, args.before, args.knobs, args.rounds)
    if not args.no_filters_alone:
        filters_alone(old_filter(args.before))
