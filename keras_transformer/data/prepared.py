"""Prepared corpora: tokenized once into sharded TFRecords of ids, read back as token-budget
batches that a resumed run seeks into instead of replaying (fairseq-preprocess and
t2t-datagen do the same preparation).

    manifest = prepare("tsv:train.tsv", "data/prepared", "runs/a/spm.model")
    batches = prepared_batches(manifest, max_length=256, batch_tokens=4096, seed=1)

Layout: `DIR/train-NNNNN.tfrecord` shards of `examples_per_shard` pairs in corpus order, each
record a `tf.train.Example` with int64 lists `source` and `target` (subword pieces, no BOS or
EOS); `DIR/spm.model`, the vocabulary; `DIR/manifest.json` (`prepared_manifest`).

The training stream, for seed s and worker w of W (worker w reads shards w, w + W, ...):
epoch e takes the worker's shards in a permutation drawn from (s, e); each shard's examples
are permuted by (s, e, shard), filtered by `max_length`, and bucketed by length into batches
on their own, the remainders of a shard's buckets dropped (another permutation next epoch
drops others). So the number of batches of a shard is a function of its length histogram,
and batch i of the stream is found by arithmetic on the manifest: whole epochs and shards
are skipped without reading them, and only the batches before i of one shard are built.
Differences from the on-the-fly stream (`pipeline.make_batches`), for the same seed: another
order (shard permutation and in-shard permutation instead of a 50,000-example shuffle
buffer), and up to one partial batch per bucket and shard left out of each epoch.
"""

from __future__ import annotations

import bisect
import logging
import os

import numpy as np
import tensorflow as tf

from keras_transformer.config import TrainingConfig
from keras_transformer.data import corpus
from keras_transformer.data import prepared_manifest as manifests
from keras_transformer.data.pipeline import _to_dense, bucket_layout
from keras_transformer.data.prepared_manifest import Manifest, Shard
from keras_transformer.data.tokenizer import BOS_ID, EOS_ID, SubwordTokenizer

logger = logging.getLogger("keras_transformer")
_FEATURES = {
    "source": tf.io.RaggedFeature(tf.int64),
    "target": tf.io.RaggedFeature(tf.int64),
}
_EPOCHS = 2**40  # "forever" for the epoch counter
_TOKENIZE_BATCH = 1024


def prepare(
    dataset: str,
    output_dir: str,
    vocabulary: str,
    *,
    reverse: bool = False,
    data_dir: str | None = None,
    max_chars: int = 1000,
    examples_per_shard: int = 500_000,
) -> Manifest:
    """Tokenize the train split of `dataset` (any `corpus` spec) with the SentencePiece model
    at `vocabulary` into shards in `output_dir`; writes `spm.model` and, last,
    `manifest.json`. Returns the manifest."""
    if not isinstance(examples_per_shard, int) or examples_per_shard < 1:
        raise ValueError(
            f"examples_per_shard must be a positive integer. "
            f"Received: examples_per_shard={examples_per_shard!r}"
        )
    if manifests.is_prepared(dataset):
        raise ValueError(f"The corpus is already prepared. Received: dataset={dataset!r}")
    with open(vocabulary, "rb") as f:
        proto = f.read()
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, manifests.VOCABULARY_FILE), "wb") as f:
        f.write(proto)
    tokenizer = SubwordTokenizer(proto)
    pairs = corpus.load_corpus(
        dataset, "train", data_dir=data_dir, max_chars=max_chars, reverse=reverse
    )
    ids = pairs.batch(_TOKENIZE_BATCH).map(
        lambda b: (tokenizer.tokenize(b["source"]), tokenizer.tokenize(b["target"])),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    shards = _write_shards(ids, output_dir, examples_per_shard)
    manifest = Manifest(
        output_dir, dataset, reverse, max_chars, manifests.sha256_of(proto),
        tokenizer.vocab_size, examples_per_shard, tuple(shards),
    )  # fmt: skip
    manifests.save(manifest)
    logger.info(
        "Prepared %s: %d pairs in %d shards in %s",
        dataset, manifest.examples, len(shards), output_dir,
    )  # fmt: skip
    return manifest


def _write_shards(ids: tf.data.Dataset, output_dir: str, per_shard: int) -> list[Shard]:
    """Write `(source, target)` ragged id batches as shards of `per_shard` examples."""
    shards: list[Shard] = []
    writer, count, lengths = None, 0, {}
    for source, target in ids:
        for src, tgt in zip(source.numpy(), target.numpy()):
            if writer is None:
                name = f"train-{len(shards):05d}.tfrecord"
                writer, count, lengths = tf.io.TFRecordWriter(os.path.join(output_dir, name)), 0, {}
            writer.write(_example(src, tgt))
            length = max(len(src), len(tgt)) + 1  # EOS (source, labels) or BOS (target)
            lengths[length] = lengths.get(length, 0) + 1
            count += 1
            if count == per_shard:
                shards.append(_close(writer, output_dir, name, count, lengths))
                writer = None
    if writer is not None:
        shards.append(_close(writer, output_dir, name, count, lengths))
    return shards


def _example(source: np.ndarray, target: np.ndarray) -> bytes:
    feature = {
        "source": tf.train.Feature(int64_list=tf.train.Int64List(value=source)),
        "target": tf.train.Feature(int64_list=tf.train.Int64List(value=target)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _close(writer, output_dir: str, name: str, count: int, lengths: dict) -> Shard:
    writer.close()
    size = os.path.getsize(os.path.join(output_dir, name))
    return Shard(name, count, size, tuple(sorted(lengths.items())))


def worker_shards(manifest: Manifest, worker: int, num_workers: int) -> list[int]:
    """The shards worker `worker` of `num_workers` reads: `worker`, `worker + num_workers`, ...
    (disjoint; together all shards). A ValueError if a worker would get none."""
    if not 0 <= worker < num_workers:
        raise ValueError(
            f"worker must be in [0, num_workers). Received: worker={worker}, "
            f"num_workers={num_workers}"
        )
    if num_workers > len(manifest.shards):
        raise ValueError(
            f"Every worker needs a shard: prepare with fewer --examples-per-shard. Received: "
            f"num_workers={num_workers}, shards={len(manifest.shards)}"
        )
    return list(range(worker, len(manifest.shards), num_workers))


def shard_batch_count(
    shard: Shard, boundaries: list[int], sizes: list[int], max_length: int
) -> int:
    """Batches one epoch of `shard` gives (`bucket_layout`'s buckets, remainders dropped)."""
    per_bucket = [0] * len(sizes)
    for length, count in shard.lengths:
        if length <= max_length:
            per_bucket[bisect.bisect_right(boundaries, length)] += count
    return sum(count // size for count, size in zip(per_bucket, sizes))


def prepared_batches(
    manifest: Manifest,
    *,
    max_length: int,
    batch_tokens: int,
    num_replicas: int = 1,
    seed: int | None = None,
    start_batch: int = 0,
    worker: int = 0,
    num_workers: int = 1,
    pad_to_bucket_boundary: bool = True,
) -> tf.data.Dataset:
    """The training stream of a prepared corpus from batch `start_batch` on (the module
    docstring), as `pipeline.make_batches` gives it: forever, `(inputs, labels)` elements.
    Raises ValueError if no pair fits `max_length`."""
    boundaries, sizes = bucket_layout(
        max_length, batch_tokens, num_replicas, pad_to_bucket_boundary
    )
    local = worker_shards(manifest, worker, num_workers)
    counts = [shard_batch_count(manifest.shards[i], boundaries, sizes, max_length) for i in local]
    if sum(counts) == 0:
        raise ValueError(
            "No full batch of prepared pairs has both sides within max_length (in subword "
            f"pieces, EOS included). Received: max_length={max_length}"
        )
    seed = 0 if seed is None else seed
    layout = dict(
        boundaries=boundaries, sizes=sizes, max_length=max_length,
        pad_to_bucket_boundary=pad_to_bucket_boundary,
    )  # fmt: skip
    epoch, position, skip = _seek(start_batch, local, counts, seed)
    paths = tf.constant([manifest.shard_path(manifest.shards[i]) for i in local])

    def plan_of(epoch, position):
        shard = tf.gather(_epoch_order(len(local), seed, epoch), position)
        return _shard_plan(paths[shard], seed, epoch, tf.gather(local, shard), layout)

    index = tf.data.Dataset.range(epoch, _EPOCHS).flat_map(
        lambda e: tf.data.Dataset.range(len(local)).map(lambda p: (e, p))
    )
    # Shards are bucketed in parallel (two at a time: a shard's ids are held in memory), in
    # order; their batches are cut in parallel, in order.
    plans = index.skip(position).map(plan_of, num_parallel_calls=2, deterministic=True)
    batches = plans.flat_map(lambda plan: _plan_batches(plan, layout)).skip(skip)
    return _finish(batches, num_replicas, num_workers)


def _finish(batches: tf.data.Dataset, num_replicas: int, num_workers: int) -> tf.data.Dataset:
    from keras_transformer.data.pipeline import _batch_options, finish_batches

    options = _batch_options()
    if num_workers > 1:  # each worker reads its own shards already
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return finish_batches(batches, num_replicas, True, options)


def _epoch_order(n: int, seed: int, epoch) -> tf.Tensor:
    """int64 (n,): the positions of a worker's shards in `epoch`, drawn from (seed, epoch)."""
    key = tf.stack([tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64)])
    return tf.random.experimental.stateless_shuffle(tf.range(n, dtype=tf.int64), seed=key)


def _seek(start_batch: int, local: list[int], counts: list[int], seed: int):
    """`(epoch, position in the epoch's shard order, batches to skip in that shard)` of batch
    `start_batch`: arithmetic on the counts, one permutation drawn."""
    if start_batch < 0:
        raise ValueError(f"start_batch must be >= 0. Received: start_batch={start_batch}")
    epoch, rest = divmod(start_batch, sum(counts))
    order = _epoch_order(len(local), seed, epoch).numpy()
    for position, shard in enumerate(order):
        if rest < counts[shard]:
            return epoch, position, rest
        rest -= counts[shard]
    raise AssertionError("unreachable: rest < sum(counts)")


def _permuted_shard(path, seed: int, epoch, shard) -> dict[str, tf.RaggedTensor]:
    """One shard's examples in the permutation drawn from (seed, epoch, shard), as
    `pipeline.tokenize_pairs` gives them: ragged int32 (n, None) `source` + EOS, BOS +
    `target`, `labels` = target + EOS."""
    records = tf.data.TFRecordDataset(path).batch(2**31 - 1).get_single_element()  # (n,)
    parsed = tf.io.parse_example(records, _FEATURES)
    key = tf.stack(
        [tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64) * 2**20 + tf.cast(shard, tf.int64)]
    )
    order = tf.random.experimental.stateless_shuffle(tf.range(tf.size(records)), seed=key)
    source = tf.cast(tf.gather(parsed["source"], order), tf.int32)  # ragged (n, None)
    target = tf.cast(tf.gather(parsed["target"], order), tf.int32)  # ragged (n, None)
    column = tf.fill([source.nrows(), 1], EOS_ID)  # -> (n, 1)
    eos = tf.RaggedTensor.from_tensor(column, row_splits_dtype=source.row_splits.dtype)
    bos = tf.RaggedTensor.from_tensor(
        column - EOS_ID + BOS_ID, row_splits_dtype=eos.row_splits.dtype
    )
    return {
        "source": tf.concat([source, eos], axis=1),
        "target": tf.concat([bos, target], axis=1),
        "labels": tf.concat([target, eos], axis=1),
    }


def _shard_examples(path, seed: int, epoch, shard, max_length: int) -> tf.data.Dataset:
    """`_permuted_shard` one example at a time, those longer than `max_length` left out: the
    input `bucket_batches` (tf.data's bucketing) takes, the reference of `_shard_batches`."""

    def fits(example):
        return tf.logical_and(
            tf.size(example["source"]) <= max_length, tf.size(example["labels"]) <= max_length
        )

    examples = tf.data.Dataset.range(1).map(lambda _: _permuted_shard(path, seed, epoch, shard))
    return examples.flat_map(tf.data.Dataset.from_tensor_slices).map(_to_dense).filter(fits)


def _shard_plan(path, seed: int, epoch, shard, layout: dict) -> dict[str, tf.Tensor]:
    """One shard's epoch, bucketed on the whole shard at once: its kept examples in batch order
    (ragged int32 `source`, `target`, `labels` (rows, None)) and per batch int32 `starts`,
    `sizes` and `buckets` (batches,). The batches are those of `bucket_batches(
    _shard_examples(...), drop_remainder=True)`: an example's bucket and its rank among the
    bucket's earlier examples give its batch, and a batch is emitted when its last example
    arrives, as tf.data's `bucket_by_sequence_length` does."""
    sizes = tf.constant(layout["sizes"], tf.int32)
    examples = _permuted_shard(path, seed, epoch, shard)
    length = tf.maximum(examples["source"].row_lengths(), examples["labels"].row_lengths())
    kept = tf.cast(tf.where(length <= layout["max_length"])[:, 0], tf.int32)  # (k,) in order
    k = tf.shape(kept)[0]
    boundaries = tf.constant(layout["boundaries"], tf.int32)
    bucket = tf.searchsorted(boundaries, tf.cast(tf.gather(length, kept), tf.int32), "right")
    one_hot = tf.one_hot(bucket, len(layout["sizes"]), dtype=tf.int32)  # -> (k, buckets)
    rank = tf.reduce_sum((tf.cumsum(one_hot, axis=0) - one_hot) * one_hot, axis=1)  # (k,)
    size = tf.gather(sizes, bucket)  # (k,)
    in_full = rank // size < tf.gather(tf.reduce_sum(one_hot, axis=0) // sizes, bucket)
    last = tf.logical_and(in_full, rank % size == size - 1)  # a batch's last example
    key = bucket * (k + 1) + rank // size  # (k,) its batch: (bucket, rank // size)
    emission = tf.math.unsorted_segment_max(tf.range(k), key, tf.reduce_max(key) + 1)
    members = tf.boolean_mask(tf.range(k), in_full)  # positions in `kept`
    # int64: emission * k overflows int32 from 46,341 examples a shard on.
    at = tf.cast(tf.gather(emission, tf.boolean_mask(key, in_full)), tf.int64)
    order = tf.argsort(at * tf.cast(k, tf.int64) + tf.cast(members, tf.int64))
    rows = tf.gather(kept, tf.gather(members, order))  # examples in batch order
    batch_sizes = tf.boolean_mask(size, last)
    plan = {name: tf.gather(examples[name], rows) for name in ("source", "target", "labels")}
    plan.update(
        starts=tf.cumsum(batch_sizes, exclusive=True),
        sizes=batch_sizes,
        buckets=tf.boolean_mask(bucket, last),
    )
    return plan


def _plan_batches(plan: dict[str, tf.Tensor], layout: dict) -> tf.data.Dataset:
    """A `_shard_plan`'s batches, padded as `bucket_batches` pads them: per batch a slice of
    rows and a pad, in parallel, in order."""
    boundaries = tf.constant(layout["boundaries"], tf.int32)

    def batch(start, count, bucket_id):
        width = _bucket_width(boundaries, bucket_id, layout)
        padded = {}
        for name in ("source", "target", "labels"):
            values = plan[name][start : start + count].to_tensor()  # -> (count, longest)
            if width is not None:
                values = tf.pad(values, [[0, 0], [0, width - tf.shape(values)[1]]])
            padded[name] = values  # -> (count, width)
        return padded

    slices = tf.data.Dataset.from_tensor_slices((plan["starts"], plan["sizes"], plan["buckets"]))
    return slices.map(batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _shard_batches(path, seed: int, epoch, shard, layout: dict) -> tf.data.Dataset:
    """`_plan_batches` of one shard's `_shard_plan`."""
    plan = tf.data.Dataset.range(1).map(lambda _: _shard_plan(path, seed, epoch, shard, layout))
    return plan.flat_map(lambda p: _plan_batches(p, layout))


def _bucket_width(boundaries: tf.Tensor, bucket_id, layout: dict):
    """The padded length of a bucket's batches: its upper bound - 1 when padding to bucket
    boundaries (the last bucket never holds a kept example then), else None (the longest)."""
    if not layout["pad_to_bucket_boundary"]:
        return None
    return tf.gather(boundaries, tf.minimum(bucket_id, tf.size(boundaries) - 1)) - 1


def training_batches(
    cfg: TrainingConfig,
    tokenizer: SubwordTokenizer,
    num_replicas: int,
    start_batch: int,
    worker: int = 0,
    num_workers: int = 1,
) -> tf.data.Dataset:
    """A run's training stream from its prepared corpus (`cfg.data.dataset`, `prepared:DIR`),
    from batch `start_batch` on: worker `worker` of `num_workers`'s own shards
    (`worker_shards`). Refuses, naming both values, a corpus prepared with another
    vocabulary than `tokenizer`'s or in the other direction (`reverse`), and fewer shards
    than workers."""
    manifest = manifests.load(cfg.data.dataset)
    manifests.check_vocabulary(manifest, tokenizer.model_proto, "the run's spm.model")
    if manifest.reverse != cfg.data.reverse:
        raise ValueError(
            f"The corpus in {manifest.directory!r} was prepared with reverse="
            f"{manifest.reverse}, the run asks reverse={cfg.data.reverse}: prepare it again "
            "with the run's --reverse"
        )
    shards = worker_shards(manifest, worker, num_workers)
    logger.info(
        "Training stream: %d prepared pairs in %d shards, worker %d of %d reads shards %s, "
        "from its batch %d (a seek, no replay)", manifest.examples, len(manifest.shards),
        worker, num_workers, shards, start_batch,
    )  # fmt: skip
    if len(manifest.shards) % num_workers:
        logger.warning(
            "%d shards for %d workers: the workers' epochs differ in length, the examples of "
            "the shorter ones come more often (prepare a multiple of the workers' shards)",
            len(manifest.shards), num_workers,
        )  # fmt: skip
    return prepared_batches(
        manifest, max_length=cfg.architecture.max_length, batch_tokens=cfg.recipe.batch_tokens,
        num_replicas=num_replicas, seed=cfg.recipe.seed, start_batch=start_batch,
        worker=worker, num_workers=num_workers,
    )  # fmt: skip
