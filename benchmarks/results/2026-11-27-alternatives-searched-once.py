"""Guided alternatives of documents of 1, 2 and 4 sentences (prefix "Die ", k alternatives,
beam 4, the bundled test split's sentences of 6-14 words ending in "."): `decoding/guided.py`
of another checkout (before: k searches of every sentence) against this one's (after: k
searches of the sentence the alternatives branch from, one of each other sentence),
alternated call by call in one process; the first of 6 rounds is warm-up.

    git worktree add /tmp/before 6167aa3
    python benchmarks/results/2026-11-27-alternatives-searched-once.py RUN /tmp/before 4
"""

import gzip
import importlib.util
import sys
import time

import numpy as np
import tensorflow as tf

from keras_transformer import SearchOptions
from keras_transformer.artifacts import load_trained
from keras_transformer.decoding import Translator
from keras_transformer.decoding import guided as after

TEST = "keras_transformer/data/sample/en_de.test.tsv.gz"


def load_before(root: str):
    path = f"{root}/keras_transformer/decoding/guided.py"
    spec = importlib.util.spec_from_file_location("guided_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["guided_before"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def sentences_of_test_split(count: int = 40) -> list[str]:
    lines = gzip.open(TEST, "rt", encoding="utf-8").read().splitlines()
    sources = [line.split("\t")[0] for line in lines]
    return [s for s in sources if 6 <= len(s.split()) <= 14 and s.endswith(".")][:count]


def main(run_dir: str, before_root: str, k: int, rounds: int = 6) -> None:
    model, _, tokenizer = load_trained(run_dir)
    translator = Translator(model, tokenizer, SearchOptions())
    before = load_before(before_root)
    functions = {
        "before": before.guided_function(translator, alternatives=k),
        "after": after.guided_function(translator, alternatives=k),
    }
    blank = tf.constant([""])
    rows = sentences_of_test_split()
    for sentences in (1, 2, 4):
        docs = [" ".join(rows[i * sentences : (i + 1) * sentences]) for i in range(8)]
        times, outs = {name: [] for name in functions}, {}
        for r in range(rounds):
            for i, doc in enumerate(docs):
                order = list(functions.items())
                for name, function in order if (r + i) % 2 == 0 else order[::-1]:
                    start = time.perf_counter()
                    out = function(tf.constant([doc]), tf.constant(["Die "]), blank, blank, blank)
                    seconds = time.perf_counter() - start
                    if r > 0:
                        times[name].append(seconds)
                    outs.setdefault((name, i), out["translations"].numpy().tolist())
        same = all(outs[("before", i)] == outs[("after", i)] for i in range(len(docs)))
        b, a = np.median(times["before"]), np.median(times["after"])
        print(
            f"k={k} sentences={sentences}: before {b * 1e3:.1f} ms, after {a * 1e3:.1f} ms, "
            f"before/after {b / a:.2f}x, same translations: {same}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
