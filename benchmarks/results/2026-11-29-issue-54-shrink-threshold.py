"""Issue 54: the growing search's `LoopOptions.shrink_threshold` (0, 0.25 the default, 0.5, 1:
never drop finished items) under both early stops, at batch 64 with a trained model.

    PYTHONPATH=. python benchmarks/results/2026-11-29-issue-54-shrink-threshold.py RUN \
        [ROUNDS [THRESHOLDS [STOPS]]]      # e.g. RUN 3 0,0.25,0.5,1 limit,next

The default export's translator (`translate_tensors` in a `tf.function`) on the first 256
test lines of one sentence in 4 batches of 64, each threshold patched into
`decoding.search.LoopOptions` before its translator traces; translations compared with the
first threshold's; sentences/s per round (systems alternated), median. A one-off study kept
as the command behind 2026-11-29-issue-54-trained-base.md; not a workload."""

import functools
import sys
import time

import numpy as np
import tensorflow as tf

from benchmarks.latency_benchmark import one_sentence_lines
from keras_transformer import SearchOptions, artifacts, malloc
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator, loop
from keras_transformer.decoding import search as search_mod


def main():
    malloc.keep_freed_memory()
    run = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    thresholds = (
        [float(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else [0.0, 0.25, 0.5, 1.0]
    )
    looks = sys.argv[4].split(",") if len(sys.argv) > 4 else ["limit", "next"]
    model, config, tok = artifacts.load_trained(run)
    texts = [s for s, _ in read_pairs("sample_en_de", "test")]
    texts = one_sentence_lines(texts)[:256]
    chunks = [tf.constant(texts[i : i + 64]) for i in range(0, 256, 64)]
    alpha = artifacts.run_eval_alpha(run)
    systems = {}
    for look in looks:
        for th in thresholds:
            search_mod.LoopOptions = functools.partial(loop.LoopOptions, shrink_threshold=th)
            tr = Translator(model, tok, SearchOptions(alpha=alpha, stop_lookahead=look))
            f = tf.function(
                tr.translate_tensors, input_signature=[tf.TensorSpec([None], tf.string)]
            )
            outs = [f(c)["translations"].numpy() for c in chunks]  # traces here, under the patch
            systems[(look, th)] = (f, outs)
    ref = {look: systems[(look, thresholds[0])][1] for look in looks}
    for (look, th), (_, outs) in systems.items():
        same = all((a == b).all() for a, b in zip(outs, ref[look]))
        print(look, th, "same translations as first threshold:", same, flush=True)
    times = {k: [] for k in systems}
    names = list(systems)
    for r in range(rounds):
        for k in names if r % 2 == 0 else names[::-1]:
            st = time.perf_counter()
            for c in chunks:
                systems[k][0](c)["translations"].numpy()
            times[k].append(time.perf_counter() - st)
    for k, v in times.items():
        print(
            k,
            "sentences/s",
            [round(256 / t, 2) for t in v],
            "median",
            round(256 / float(np.median(v)), 2),
            flush=True,
        )


if __name__ == "__main__":
    main()
