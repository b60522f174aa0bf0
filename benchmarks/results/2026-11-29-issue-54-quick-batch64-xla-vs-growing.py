"""Issue 54: at batch 64, the XLA fixed-buffer search against the growing search (search only).

    TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 PYTHONPATH=. \
        python benchmarks/results/2026-11-29-issue-54-quick-batch64-xla-vs-growing.py RUN

The first 256 test lines of one sentence, sorted by length, in 4 batches of 64; both stops;
the rows whose ids agree (over the shorter width), and sentences/s (median of 3 passes).
Checks `search.XLA_MAX_ROWS` with a trained model's short outputs. A one-off study kept as
the command behind 2026-11-29-issue-54-trained-base.md; not a workload."""

import sys
import time

import numpy as np
import tensorflow as tf

from benchmarks.latency_benchmark import one_sentence_lines
from keras_transformer import SearchOptions, artifacts
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator
from keras_transformer.decoding.search import XLA_WIDTH_MULTIPLE, pad_width


def main():
    run = sys.argv[1]
    model, config, tok = artifacts.load_trained(run)
    texts = [s for s, _ in read_pairs("sample_en_de", "test")]
    texts = one_sentence_lines(texts)[:256]
    # length-sorted batches, as translate_tensors batches them
    lens = [int(x) for x in tok.tokenize(tf.constant(texts)).row_lengths().numpy()]
    order = np.argsort(lens, kind="stable")
    texts = [texts[i] for i in order]
    chunks = [texts[i : i + 64] for i in range(0, 256, 64)]
    alpha = artifacts.run_eval_alpha(run)
    srcs = [tok.encode_source(tf.constant(c), config.max_length).to_tensor() for c in chunks]
    for look in ("next", "limit"):
        opts = SearchOptions(alpha=alpha, stop_lookahead=look)
        grow = Translator(model, tok, opts).search_function(1)
        xla = Translator(
            model, tok, opts.replace(padded_decode=True), jit_compile=True
        ).search_function(1)
        xs = [pad_width(s, XLA_WIDTH_MULTIPLE) for s in srcs]
        same = []
        for s, x in zip(srcs, xs):
            a = grow(s)[0].numpy()[:, 0]
            b = xla(x)[0].numpy()[:, 0]
            w = min(a.shape[1], b.shape[1])
            same.append(int((a[:, :w] == b[:, :w]).all(axis=1).sum()))
        t = {"growing": [], "xla": []}
        for _ in range(3):
            for name, f, args in (("growing", grow, srcs), ("xla", xla, xs)):
                st = time.perf_counter()
                for a in args:
                    f(a)[0].numpy()
                t[name].append(time.perf_counter() - st)
        print(
            look,
            "same rows (prefix)",
            same,
            {k: round(256 / float(np.median(v)), 1) for k, v in t.items()},
            "sentences/s",
            flush=True,
        )


if __name__ == "__main__":
    main()
