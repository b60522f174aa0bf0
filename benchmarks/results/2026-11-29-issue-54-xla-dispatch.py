"""Issue 54: what `Translator._xla_search`'s dispatch by rows (`search.XLA_MAX_ROWS`) costs
a one-sentence request of a `jit_compile` translator.

    PYTHONPATH=. python benchmarks/results/2026-11-29-issue-54-xla-dispatch.py RUN [ROUNDS]

Two XLA translators of RUN in one process (beam 4, the next-step stop, the run's alpha):
this checkout's, and the same with the dispatch left out (XLA for every batch). Each one's
`translate_tensors` in a `tf.function`, the same translations checked on every sentence,
then alternated call by call over ROUNDS (default 30) rounds of 6 test sentences of ~5, ~20
and ~50 pieces; medians in ms. A one-off study kept as the command behind
2026-11-29-issue-54-xla-rows.md; not a workload.
"""

import sys
import time

import numpy as np
import tensorflow as tf

from benchmarks.latency_benchmark import pick_sentences
from keras_transformer import SearchOptions, artifacts, malloc
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator


def main() -> None:
    malloc.keep_freed_memory()
    run = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    model, _, tokenizer = artifacts.load_trained(run)
    options = SearchOptions(
        alpha=artifacts.run_eval_alpha(run), stop_lookahead="next", padded_decode=True
    )
    spec = [tf.TensorSpec([None], tf.string)]
    dispatch = Translator(model, tokenizer, options, jit_compile=True)
    always = Translator(model, tokenizer, options, jit_compile=True)
    search = always._xla_search
    always._xla_search = lambda function, source, growing=None: search(function, source)
    systems = {
        "dispatch": tf.function(dispatch.translate_tensors, input_signature=spec),
        "XLA always": tf.function(always.translate_tensors, input_signature=spec),
    }
    texts = [source for source, _ in read_pairs("sample_en_de", "test")]

    def count(text):
        return int(tokenizer.tokenize(tf.constant([text])).row_lengths()[0])

    for length in (5, 20, 50):
        sentences = pick_sentences(texts, count, length, 6)
        for text in sentences:
            outputs = [f(tf.constant([text]))["translations"].numpy().tolist()
                       for f in systems.values()]  # fmt: skip
            assert outputs[0] == outputs[1], text
        times = {name: [] for name in systems}
        for round_ in range(rounds):
            for text in sentences:
                for name in list(systems)[:: 1 if round_ % 2 == 0 else -1]:
                    start = time.perf_counter()
                    systems[name](tf.constant([text]))["translations"].numpy()
                    times[name].append(time.perf_counter() - start)
        ms = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
        print(f"~{length} pieces: dispatch {ms['dispatch']:.2f} ms, XLA always "
              f"{ms['XLA always']:.2f} ms, ratio {ms['dispatch'] / ms['XLA always']:.3f}",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
