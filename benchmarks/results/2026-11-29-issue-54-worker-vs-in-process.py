"""Issue 54: our export's `serving_default` in this process against the same export in a
`benchmarks.savedmodel_process.Worker` (two and one threads), beside CTranslate2 at one
thread, alternated request by request (`latency_rows`), to check that a worker process does
not change our one-sentence latency.

    PYTHONPATH=. python benchmarks/results/2026-11-29-issue-54-worker-vs-in-process.py \
        RUN EXPORT [ROUNDS]

RUN: the run's model directory (sentences and CTranslate2's conversion); EXPORT: its
`--jit-compile --stop-lookahead next` export. Six test sentences of ~5, ~20 and ~50 pieces.
A one-off check kept as the command behind 2026-11-29-issue-54-our-threads.md.
"""

import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401

from benchmarks.latency_benchmark import (
    ctranslate2_systems,
    latency_rows,
    pick_sentences,
    print_latency,
)
from benchmarks.savedmodel_process import Worker
from keras_transformer import SearchOptions, artifacts, malloc
from keras_transformer.data.corpus import read_pairs


def main() -> None:
    malloc.keep_freed_memory()
    run, export = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    model, _, tokenizer = artifacts.load_trained(run)
    texts = [source for source, _ in read_pairs("sample_en_de", "test")]

    def count(text):
        return int(tokenizer.tokenize(tf.constant([text])).row_lengths()[0])

    sentences = {n: pick_sentences(texts, count, n, 6) for n in (5, 20, 50)}
    signature = tf.saved_model.load(export).signatures["serving_default"]
    systems = {
        "in process, 2 threads": lambda t: signature(text=tf.constant(t))["translations"],
        "worker, 2 threads": Worker(export, 2),
        "worker, 1 thread": Worker(export, 1),
    }
    search = SearchOptions(alpha=artifacts.run_eval_alpha(run))
    spm = artifacts.path(run, artifacts.TOKENIZER_FILE)
    systems.update(ctranslate2_systems(model, spm, search, (1,)))
    print_latency(latency_rows(systems, sentences, rounds))


if __name__ == "__main__":
    main()
