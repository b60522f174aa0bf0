"""The XLA export's warm-up records, a probe: replay an export's
`assets.extra/tf_serving_warmup_requests` in a fresh process as TF Serving does when it loads
the version (timed: the load's added work), then time the first and the second one-sentence
request of each length for each search signature (`translate_markup` first: it runs
`serving_default`'s search).

    python benchmarks/results/2026-11-28-xla-warmup-buckets.py EXPORT_DIR MODEL_DIR \
        [--pieces 8 20 31 32 50 68] [--replay-only]

EXPORT_DIR: a version directory of `keras-transformer-export --jit-compile`; MODEL_DIR: its
model directory (the sentences are built with its `spm.model` to the piece counts asked,
from plain words without punctuation; sentences over the segment limit are cut into parts
as served). The command behind 2026-11-28-xla-warmup-buckets.md; not a workload.
"""

import argparse
import os
import time

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops of the export)

SIGNATURES = ["translate_markup", "serving_default", "translate_nbest", "translate_sample"]
KNOBS = {
    "temperature": tf.constant(1.0, tf.float64),
    "top_k": tf.constant(0, tf.int64),
    "top_p": tf.constant(1.0, tf.float64),
    "seed": tf.constant(0, tf.int64),
}
WORDS = "the house is small and the garden of our neighbours was very green in the summer"


def replay(loaded, export_dir: str) -> tuple[int, float]:
    """Run every warm-up record through its signature; `(records, seconds)`."""
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(export_dir, "assets.extra", "tf_serving_warmup_requests")
    start, count = time.perf_counter(), 0
    for record in tf.data.TFRecordDataset(path):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        inputs = {k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
        loaded.signatures[request.model_spec.signature_name](**inputs)
        count += 1
    return count, time.perf_counter() - start


def sentence_of(processor, pieces: int) -> str:
    """Plain words, as many as fit in `pieces` SentencePiece pieces."""
    words, out = WORDS.split(), []
    while len(processor.encode(" ".join(out))) < pieces:
        out.append(words[len(out) % len(words)])
    while len(processor.encode(" ".join(out))) > pieces:
        out.pop()
    return " ".join(out)


def first_requests(loaded, processor, lengths) -> None:
    slowest = 0.0
    for pieces in lengths:
        text = sentence_of(processor, pieces)
        cells = []
        for name in SIGNATURES:
            extra = KNOBS if name == "translate_sample" else {}
            times = []
            for _ in range(2):
                start = time.perf_counter()
                loaded.signatures[name](text=tf.constant([text]), **extra)
                times.append(1e3 * (time.perf_counter() - start))
            slowest = max(slowest, times[0])
            cells.append(f"{name} {times[0]:.0f} / {times[1]:.0f}")
        got = len(processor.encode(text))
        print(f"{got} pieces, first / second ms: " + "; ".join(cells), flush=True)
    print(f"slowest first request: {slowest:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export_dir")
    parser.add_argument("model_dir")
    parser.add_argument("--pieces", type=int, nargs="+", default=[8, 20, 31, 32, 50, 68])
    parser.add_argument("--replay-only", action="store_true", help="only time the replay")
    args = parser.parse_args()
    loaded = tf.saved_model.load(args.export_dir)
    count, seconds = replay(loaded, args.export_dir)
    print(f"{args.export_dir}: warm-up replay of {count} records: {seconds:.1f} s", flush=True)
    if not args.replay_only:
        processor = spm.SentencePieceProcessor(model_file=os.path.join(args.model_dir, "spm.model"))
        first_requests(loaded, processor, args.pieces)


if __name__ == "__main__":
    main()
