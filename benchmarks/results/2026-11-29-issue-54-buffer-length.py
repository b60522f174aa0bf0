"""Issue 54: what the XLA search's buffer length costs a one-sentence request: buffers of
the padded source width + 50 positions (the paper's limit, this checkout) against width + 10.

    TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 PYTHONPATH=. \\
        python benchmarks/results/2026-11-29-issue-54-buffer-length.py RUN [ROUNDS]

Two XLA searches of RUN in one process (`search_function(1)`, beam 4, the next-step stop, the
run's alpha), `max_extra_length` 50 and 10: the cache, its reorder and self-attention span
`width + max_extra_length` positions from the first step. Checked: the same ids on every
sentence (no output reaches the shorter limit). Then alternated call by call over ROUNDS
(default 20) rounds of 6 test sentences of ~5, ~20 and ~50 pieces; medians in ms. The bound
of any design that sizes the buffers to the output (growing them in static steps, or a short
first pass): a study kept as the command behind 2026-11-29-issue-54-one-thread-split.md; not
a workload.
"""

import sys
import time

import numpy as np
import tensorflow as tf

from benchmarks.latency_benchmark import pick_sentences
from keras_transformer import SearchOptions, artifacts, malloc
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator
from keras_transformer.decoding.search import pad_rows

EXTRA = (50, 10)


def main() -> None:
    malloc.keep_freed_memory()
    run = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    model, _, tokenizer = artifacts.load_trained(run)
    options = SearchOptions(
        alpha=artifacts.run_eval_alpha(run), stop_lookahead="next", padded_decode=True
    )
    searches = {
        extra: Translator(model, tokenizer, options.replace(max_extra_length=extra),
                          jit_compile=True)
        for extra in EXTRA
    }  # fmt: skip
    texts = [source for source, _ in read_pairs("sample_en_de", "test")]

    def count(text):
        return int(tokenizer.tokenize(tf.constant([text])).row_lengths()[0])

    for length in (5, 20, 50):
        sentences = pick_sentences(texts, count, length, 6)
        ids = [pad_rows(searches[50]._xla_width(tokenizer.encode_source(
                   tf.constant([text]), model.config.max_length).to_tensor()))
               for text in sentences]  # fmt: skip
        found = {extra: [t.search_function(1)(source)[0].numpy()[0, 0] for source in ids]
                 for extra, t in searches.items()}  # fmt: skip
        for long, short in zip(*found.values()):  # (width + 50,) and (width + 10,)
            assert np.array_equal(long[: len(short)], short) and not long[len(short) :].any()
        times = {extra: [] for extra in EXTRA}
        for round_ in range(rounds):
            for source in ids:
                for extra in EXTRA[:: 1 if round_ % 2 == 0 else -1]:
                    search = searches[extra].search_function(1)
                    start = time.perf_counter()
                    search(source)[0].numpy()
                    times[extra].append(time.perf_counter() - start)
        ms = {extra: 1e3 * float(np.median(t)) for extra, t in times.items()}
        print(f"~{length} pieces: buffers of width + 50 {ms[50]:.2f} ms, width + 10 "
              f"{ms[10]:.2f} ms, ratio {ms[50] / ms[10]:.3f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
