"""Issue 54: one batch of 64 sentences of the default export's translator split, per early stop.

    PYTHONPATH=. python benchmarks/results/2026-11-29-issue-54-batch64-split.py RUN [DTYPE]

The first 256 test lines of one sentence in 4 batches of 64 (in file order): the whole
translation (`translate_tensors`), the search alone (ids in, ids out) and the encoder alone,
medians of 2 rounds in ms; each batch's source width, loop steps (the search's output width)
and output pieces (ids other than PAD, BOS and EOS). A one-off study kept as the command behind
2026-11-29-issue-54-trained-base.md; not a workload."""

import sys
import time

import numpy as np
import tensorflow as tf

from benchmarks.latency_benchmark import one_sentence_lines
from keras_transformer import SearchOptions, artifacts, malloc
from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator


def main():
    malloc.keep_freed_memory()
    run = sys.argv[1]
    dtype = sys.argv[2] if len(sys.argv) > 2 else "float32"
    rounds = 2
    model, config, tok = artifacts.load_trained(run, dtype=dtype)
    texts = [s for s, _ in read_pairs("sample_en_de", "test")]
    texts = one_sentence_lines(texts)[:256]
    chunks = [texts[i : i + 64] for i in range(0, 256, 64)]
    alpha = artifacts.run_eval_alpha(run)
    encode = tf.function(
        lambda ids: model.encode(ids), input_signature=[tf.TensorSpec([None, None], tf.int32)]
    )
    for look in ("limit", "next"):
        opts = SearchOptions(alpha=alpha, stop_lookahead=look)
        tr = Translator(model, tok, opts)
        whole = tf.function(
            tr.translate_tensors, input_signature=[tf.TensorSpec([None], tf.string)]
        )
        search = tr.search_function(1)
        srcs = [tok.encode_source(tf.constant(c), config.max_length).to_tensor() for c in chunks]
        steps, outs = [], []
        for c, s in zip(chunks, srcs):
            whole(tf.constant(c))
            encode(s)
            ids = search(s)[0]
            steps.append(int(ids.shape[-1]) - 1)
            found = ids[:, 0, 1:]  # (64, steps): the best hypothesis, BOS dropped
            pieces = (found != PAD_ID) & (found != BOS_ID) & (found != EOS_ID)
            outs.append(int(tf.reduce_sum(tf.cast(pieces, tf.int32))))
        t = {"whole": [], "search": [], "encoder": []}
        for _ in range(rounds):
            for c, s in zip(chunks, srcs):
                for name, f, a in (
                    ("whole", whole, tf.constant(c)),
                    ("search", search, s),
                    ("encoder", encode, s),
                ):
                    st = time.perf_counter()
                    tf.nest.map_structure(lambda x: x.numpy(), f(a))
                    t[name].append(time.perf_counter() - st)
        ms = {k: round(1e3 * float(np.median(v)), 1) for k, v in t.items()}
        print(
            dtype,
            look,
            "src widths",
            [int(s.shape[1]) for s in srcs],
            "loop steps",
            steps,
            "output pieces",
            outs,
            ms,
            flush=True,
        )


if __name__ == "__main__":
    main()
