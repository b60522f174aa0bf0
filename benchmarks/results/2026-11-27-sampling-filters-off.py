"""`sample_tensors(..., "sample")` with another checkout's `filter_logits` (before: a sort of
every row at every step, even with top_k and top_p off) against this one's (after: the
logits as they are when both are off), in one process: each translator traced with its
filter, then calls alternated; the default run's model, XLA and plain searches, the
signature's default knobs (top_k 0, top_p 1) and top_k 8 (sorts in both), batches of 1 and
4 sentences of the test split, seed 1; medians.

    git worktree add /tmp/before 6167aa3
    python benchmarks/results/2026-11-27-sampling-filters-off.py RUN /tmp/before
"""

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
    return module.filter_logits


def traced(model, tokenizer, jit: bool, top_k: int, texts, filter_function):
    """A `sample_tensors` function, traced (and compiled) now with `filter_function`."""
    translator = make_translator(model, tokenizer, jit_compile=jit)
    function = tf.function(
        lambda t: translator.sample_tensors(t, "sample", top_k=top_k, seed=1),
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


def main(run: str, before: str, rounds: int = 30) -> None:
    model, _, tokenizer = load_trained(run)
    lines = gzip.open(TEST, "rt", encoding="utf-8").read().splitlines()
    rows = [line.split("\t")[0] for line in lines]
    rows = [r for r in rows if 5 <= len(r.split()) <= 12]
    texts = [rows[:1], rows[1:5]]
    old = old_filter(before)
    print("| search | top_k | sentences | before (ms) | after (ms) | before / after | same |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for jit in (True, False):
        for top_k in (0, 8):
            functions = {
                "before": traced(model, tokenizer, jit, top_k, texts, old),
                "after": traced(model, tokenizer, jit, top_k, texts, sampling.filter_logits),
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
                print(f"| {search} | {top_k} | {len(batch)} | {b * 1e3:.1f} | {a * 1e3:.1f} | "
                      f"{b / a:.2f}x | {same} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(x) for x in sys.argv[3:]))
