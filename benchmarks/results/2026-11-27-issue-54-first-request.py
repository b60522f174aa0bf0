"""Issue 54, the first request of each new source width to a `--jit-compile` export, with
and without XLA's persistent compilation cache.

    keras-transformer-export --model-dir RUN --export-base EXPORTS --jit-compile \
        --stop-lookahead next
    python benchmarks/results/2026-11-27-issue-54-first-request.py RUN EXPORTS/transformer/1
    TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=CACHE python ...  # twice: empty, filled

Loads the export (`tf.saved_model.load`, as the gRPC test double does), sends one ~5-piece
test sentence of the run RUN, then one sentence each of ~40, ~60 and ~90 pieces (source
widths 48, 64 and 96: none of them warmed), each twice, and prints every call's time. A
one-off study kept as the command behind 2026-11-27-issue-54-request-ops.md; not a workload.
"""

import argparse
import os
import time

import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.data.corpus import read_pairs


def timed(signature, text: str) -> float:
    start = time.perf_counter()
    signature(text=tf.constant([text]))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="the run's model directory (its tokenizer)")
    parser.add_argument("export", help="a --jit-compile export's version directory")
    args = parser.parse_args()
    _, _, tokenizer = artifacts.load_trained(args.run)
    start = time.perf_counter()
    signature = tf.saved_model.load(args.export).signatures["serving_default"]
    report = [f"load {time.perf_counter() - start:.1f} s"]
    texts = [source for source, _ in read_pairs("sample_en_de", "test")][:600]
    pieces = {t: int(tokenizer.tokenize(tf.constant([t])).row_lengths()[0]) for t in texts}
    for index, want in enumerate((5, 40, 60, 90)):
        text = min(pieces, key=lambda t: abs(pieces[t] - want))
        calls = ("first",) if index == 0 else ("first", "second")
        for call in calls:
            report.append(f"{pieces[text]} pieces {call} {1e3 * timed(signature, text):.0f} ms")
    print(os.environ.get("TF_XLA_FLAGS", "no persistent cache"), "|", "; ".join(report))


if __name__ == "__main__":
    main()
