"""The training input pipeline alone (no model): sentence pairs and target tokens per second,
stage by stage, per host core and on all cores, time to the first batch, and the time a
resumed run takes to reach its place in the stream (a replay on the fly, a seek in prepared
shards).

    python benchmarks/run.py profile pipeline --pairs 1000000 --json /tmp/pipeline.json

Corpora: the bundled `sample_en_de`; a TSV of `--pairs` generated pairs with WMT14 En-De-like
lengths (log-normal, median 22 words, Zipf words: written to `--work-dir`, never committed);
the TFDS WMT path on `tfds.testing.mock_data`. Stages, each a pass over the corpus's first
`--stage-pairs` pairs (prepare and the resumes use the whole corpus):
`read` (text pairs), `tokenize_serial` (the pipeline before issue 51: dense rows one at a time
on one thread), `tokenize` (now), `batches` (tokenize, shuffle, bucket: `make_batches`),
`prepared` (`prepared_batches` of the corpus prepared once; `prepare` is timed too). "1 core":
tf.data's private thread pool of one thread (the Python reader's thread comes on top).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from benchmarks import flags

SPM_SENTENCES = 20_000


def generate_tsv(path: str, pairs: int, seed: int = 0) -> None:
    """`pairs` lines of Zipf-distributed words, source lengths log-normal (median 22 words,
    WMT14 En-De's train split has a median of about 22 and a mean of about 25), target about
    as long."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(20_000)])
    ranks = np.minimum(rng.zipf(1.2, size=pairs * 60) - 1, len(words) - 1)
    lengths = np.clip(rng.lognormal(np.log(22), 0.55, size=pairs), 1, 150).astype(int)
    ratios = rng.normal(1.05, 0.15, size=pairs)
    with open(path, "w") as f:
        at = 0
        for n, ratio in zip(lengths, ratios):
            m = max(1, int(n * ratio))
            source = " ".join(words[ranks[at : at + n]])
            target = " ".join(words[ranks[at + n : at + n + m]]).upper()
            f.write(f"{source}\t{target}\n")
            at = (at + n + m) % (len(ranks) - 400)


def _time_pass(build, count) -> dict:
    """A whole pass over `build()`, counted in-graph (`count(element)` -> (pairs, tokens), int64)
    so Python pulls nothing per element: seconds, pairs and target tokens per second; and the
    time to the first element of a fresh iterator."""
    import tensorflow as tf

    start = time.perf_counter()
    next(iter(build()))
    first = time.perf_counter() - start
    start = time.perf_counter()
    pairs, tokens = build().reduce(
        (tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
        lambda total, e: tuple(a + tf.cast(b, tf.int64) for a, b in zip(total, count(e))),
    )
    seconds = time.perf_counter() - start
    return {
        "seconds": round(seconds, 2),
        "first_element_s": round(first, 3),
        "pairs_per_s": round(int(pairs) / seconds),
        "target_tokens_per_s": round(int(tokens) / seconds),
        "pairs": int(pairs),
    }


def _stages(dataset: str, tokenizer, args, manifest=None) -> dict:
    import tensorflow as tf

    from keras_transformer.data import corpus, pipeline, prepared

    def text():  # the first --stage-pairs pairs
        pairs = corpus.load_corpus(dataset, "train", data_dir=args.data_dir)
        return pairs.take(args.stage_pairs).prefetch(64)

    def serial_tokenize(pairs):  # the pipeline before issue 51: dense rows on one thread
        return (
            pairs.batch(512)
            .map(pipeline._tokenize(tokenizer), num_parallel_calls=tf.data.AUTOTUNE)
            .unbatch()
            .map(pipeline._to_dense)
            .filter(lambda e: tf.size(e["source"]) <= args.max_length)
        )

    one = tf.constant(1, tf.int64)

    def count_example(e):  # text: no tokens yet, words + 1 (EOS) as a stand-in
        if "labels" in e:
            return one, tf.size(e["labels"], out_type=tf.int64)
        return one, tf.size(tf.strings.split(e["target"]), out_type=tf.int64) + 1

    def count_batch(batch):
        labels = batch[1]
        return tf.shape(labels, out_type=tf.int64)[0], tf.math.count_nonzero(labels)

    common = dict(max_length=args.max_length, batch_tokens=args.batch_tokens)
    builds = {
        "read": (text, count_example),
        "tokenize_serial": (lambda: serial_tokenize(text()), count_example),
        "tokenize": (
            lambda: pipeline.tokenize_pairs(text(), tokenizer, args.max_length),
            count_example,
        ),
        "batches": (
            lambda: pipeline.make_batches(text(), tokenizer, training=False, **common),
            count_batch,
        ),
    }  # fmt: skip
    if manifest is not None:
        share = min(1.0, args.stage_pairs / manifest.examples)  # about --stage-pairs pairs
        epoch = max(1, round(_epoch_batches(manifest, args) * share))
        builds["prepared"] = (
            lambda: prepared.prepared_batches(manifest, **common, seed=1).take(epoch),
            count_batch,
        )
    result = {}
    for name, (build, count) in builds.items():
        for cores in ("1_core", "all_cores"):
            options = tf.data.Options()
            if cores == "1_core":
                options.threading.private_threadpool_size = 1
            result[f"{name}/{cores}"] = _time_pass(
                lambda build=build, options=options: build().with_options(options), count
            )
            print(name, cores, result[f"{name}/{cores}"], flush=True)
    return result


def _epoch_batches(manifest, args) -> int:
    from keras_transformer.data import pipeline, prepared

    boundaries, sizes = pipeline.bucket_layout(args.max_length, args.batch_tokens, 1, True)
    return sum(
        prepared.shard_batch_count(s, boundaries, sizes, args.max_length) for s in manifest.shards
    )


def _first_batch_seconds(build) -> float:
    start = time.perf_counter()
    next(iter(build()))
    return round(time.perf_counter() - start, 3)


def _resume(dataset: str, tokenizer, manifest, args) -> dict:
    """Seconds to the first batch of a stream started at batch N: replayed (`make_batches(
    skip_batches=N)`, as `trainer` did before) and sought (`prepared_batches(start_batch=N)`)."""
    from keras_transformer.data import corpus, pipeline, prepared

    common = dict(max_length=args.max_length, batch_tokens=args.batch_tokens)
    result = {}
    for n in args.resume_at:
        result[f"prepared/start_{n}"] = _first_batch_seconds(
            lambda n=n: prepared.prepared_batches(manifest, **common, seed=1, start_batch=n)
        )
        if n <= args.replay_limit:
            result[f"on_the_fly/skip_{n}"] = _first_batch_seconds(
                lambda n=n: pipeline.make_batches(
                    corpus.load_corpus(dataset, "train"),
                    tokenizer,
                    **common,
                    seed=1,
                    skip_batches=n,
                    shuffle_buffer=10_000,
                )  # fmt: skip
            )
        print("resume", n, result, flush=True)
    return result


def _vocabulary(dataset: str, path: str, data_dir=None):
    from keras_transformer.data import corpus
    from keras_transformer.data.tokenizer import SubwordTokenizer, train_sentencepiece

    if not os.path.exists(path):
        pairs = corpus.read_pairs(dataset, "train", data_dir=data_dir, limit=SPM_SENTENCES)
        train_sentencepiece((side for pair in pairs for side in pair), path, vocab_size=4000)
    return SubwordTokenizer.from_file(path)


def _corpus(name: str, dataset: str, args, prepare: bool) -> dict:
    from keras_transformer.data import prepared

    work = os.path.join(args.work_dir, name)
    os.makedirs(work, exist_ok=True)
    spm = os.path.join(work, "spm.model")
    tokenizer = _vocabulary(dataset, spm, args.data_dir)
    result, manifest = {"dataset": dataset}, None
    if prepare:
        start = time.perf_counter()
        manifest = prepared.prepare(
            dataset, os.path.join(work, "prepared"), spm, data_dir=args.data_dir,
            examples_per_shard=args.examples_per_shard,
        )  # fmt: skip
        result["prepare_seconds"] = round(time.perf_counter() - start, 1)
        result["prepared_pairs"] = manifest.examples
    result["stages"] = _stages(dataset, tokenizer, args, manifest)
    if prepare and args.resume_at:
        result["resume_first_batch_s"] = _resume(dataset, tokenizer, manifest, args)
    return result


def run(args) -> dict:
    from keras_transformer.logging_utils import import_tensorflow_quietly

    import_tensorflow_quietly()
    os.makedirs(args.work_dir, exist_ok=True)
    result = {"cores": os.cpu_count(), "batch_tokens": args.batch_tokens, "corpora": {}}
    corpora = result["corpora"]
    if "sample" in args.corpora:
        corpora["sample_en_de"] = _corpus("sample", "sample_en_de", args, prepare=True)
    if "generated" in args.corpora:
        tsv = os.path.join(args.work_dir, f"generated-{args.pairs}.tsv")
        if not os.path.exists(tsv):
            generate_tsv(tsv, args.pairs)
        corpora["generated"] = _corpus("generated", f"tsv:{tsv}", args, prepare=True)
    if "tfds_mock" in args.corpora:
        import tensorflow_datasets as tfds

        with tfds.testing.mock_data(num_examples=args.mock_pairs):
            corpora["tfds_mock"] = _corpus("tfds_mock", "wmt14_en_de", args, prepare=False)
    return result


def main(argv=None, prog: str = "python benchmarks/run.py profile pipeline") -> None:
    parser = flags.parser(prog, __doc__)
    parser.add_argument("--pairs", type=int, default=1_000_000, help="generated TSV's pairs")
    parser.add_argument(
        "--stage-pairs", type=int, default=100_000, help="pairs each stage's timed pass reads"
    )
    parser.add_argument("--mock-pairs", type=int, default=20_000, help="TFDS mock pairs")
    parser.add_argument("--corpora", nargs="+", default=["sample", "generated", "tfds_mock"])
    parser.add_argument("--work-dir", default="/tmp/keras_transformer_pipeline_benchmark")
    parser.add_argument("--data-dir", default=None, help="TFDS data directory")
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--examples-per-shard", type=int, default=500_000)
    parser.add_argument("--resume-at", type=int, nargs="*", default=[10, 1000, 10_000])
    parser.add_argument("--replay-limit", type=int, default=1000, help="largest replay timed")
    flags.add(parser, json=None)
    args = parser.parse_args(argv)
    result = run(args)
    result["command"] = flags.command(prog, argv if argv is not None else [])
    print(json.dumps(result))
    flags.write_json(result, args.json)
