"""tf.data input pipeline: tokenize in-graph, filter by length, batch by token count with length
bucketing (paper, section 5.1: batches of about 25000 source and 25000 target tokens), prefetch.

Elements in: `{"source": tf.string, "target": tf.string}` (see `keras_transformer.data.corpus`).
Elements out: `({"source": int32 (batch, src_len), "target": int32 (batch, tgt_len)},
labels int32 (batch, tgt_len))` where target = [BOS] + pieces and labels = pieces + [EOS].
Elements with an `"alignment"` line (guided alignment, `data.alignment_corpus`) add
`"alignment": float32 (batch, tgt_len, src_len)` gold rows to the inputs.

The training stream is a deterministic function of the corpus and the seed (seeded shuffle with
a generator per iterator, order-preserving parallel maps), so batch i is the same in every run: a
resumed run skips the batches it has already trained on (`skip_batches`) and sees what an
uninterrupted run would.

Several replicas: every worker builds the same stream of global batches (each a multiple of
`num_replicas` rows) and tf.distribute splits each into per-replica pieces, auto-sharding by
DATA (set here: sharding by FILE fails on a single-file corpus), so step i trains on global
batch i whatever the split into workers and replicas.
"""

from __future__ import annotations

import logging

import tensorflow as tf

from keras_transformer.data import alignment_corpus
from keras_transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, SubwordTokenizer

logger = logging.getLogger("keras_transformer")
ALIGNMENT = "alignment"  # guided alignment's feature (`data.alignment_corpus`)


def bucket_boundaries(max_length: int, min_length: int = 8, growth: float = 1.2) -> list[int]:
    """Geometric bucket boundaries `[8, 9, ...]` below `max_length + 1` (tensor2tensor style)."""
    boundaries, length = [], float(min_length)
    while length <= max_length:
        if not boundaries or int(length) > boundaries[-1]:
            boundaries.append(int(length))
        length *= growth
    return boundaries


def bucket_batch_sizes(
    boundaries: list[int], max_length: int, batch_tokens: int, num_replicas: int = 1
) -> list[int]:
    """Sentences per global batch for each bucket, so that no replica's batch holds more than
    `batch_tokens` (padded) source or target tokens.

    Bucket i holds examples of length < upper_i (upper = the next boundary, or max_length + 1),
    padded to at most upper_i - 1 tokens; its per-replica batch is batch_tokens // (upper_i - 1)
    sentences, and the global batch is that times num_replicas.
    """
    if batch_tokens < max_length:
        raise ValueError(
            f"batch_tokens must be >= max_length so a longest sentence fits. "
            f"Received: batch_tokens={batch_tokens}, max_length={max_length}"
        )
    uppers = list(boundaries) + [max_length + 1]
    return [(batch_tokens // (upper - 1)) * num_replicas for upper in uppers]


def _tokenize(tokenizer: SubwordTokenizer):
    model_proto = tokenizer.model_proto

    def tokenize(batch):
        # The SentencePiece op is created inside the dataset function, so the dataset graph is
        # self-contained: a resource created eagerly does not survive tf.distribute's rewrite
        # of the input pipeline ("Resource ... SentencepieceResource does not exist").
        local = SubwordTokenizer(model_proto)
        source = local.tokenize(batch["source"])  # ragged (n, None)
        target = local.tokenize(batch["target"])  # ragged (n, None)
        n = source.nrows()
        eos = tf.RaggedTensor.from_tensor(tf.fill([n, 1], EOS_ID))
        bos = tf.RaggedTensor.from_tensor(tf.fill([n, 1], BOS_ID))
        return {
            "source": tf.concat([source, eos], axis=1),  # pieces + EOS
            "target": tf.concat([bos, target], axis=1),  # BOS + pieces (decoder input)
            "labels": tf.concat([target, eos], axis=1),  # pieces + EOS
            **_extra_features(batch),
        }

    return tokenize


def _extra_features(batch) -> dict:
    """What an element carries besides its text (guided alignment's `"alignment"` line)."""
    return {k: v for k, v in batch.items() if k not in ("source", "target")}


def tokenize_pairs(
    pairs: tf.data.Dataset, tokenizer: SubwordTokenizer, max_length: int
) -> tf.data.Dataset:
    """String pairs -> int32 id sequences, dropping pairs with a side longer than max_length."""

    def fits(example):
        return tf.logical_and(
            tf.size(example["source"]) <= max_length, tf.size(example["labels"]) <= max_length
        )

    return (
        pairs.batch(512)
        .map(_tokenize(tokenizer), num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
        .map(_to_dense, num_parallel_calls=tf.data.AUTOTUNE)  # in order: deterministic options
        .filter(fits)
    )


def _to_dense(example):
    """Unbatched ragged rows (ragged_rank 0) -> plain 1-D tensors, which padded_batch needs."""
    return {
        name: value.to_tensor() if isinstance(value, tf.RaggedTensor) else value
        for name, value in example.items()
    }


def shuffled_epochs(
    examples: tf.data.Dataset, buffer_size: int, seed: int | None
) -> tf.data.Dataset:
    """`examples` repeated forever and reshuffled every epoch, in an order that is a pure
    function of `seed`: every iterator of the returned dataset starts the same sequence.

    A plain `shuffle(seed, reshuffle_each_iteration=True).repeat()` keeps one epoch-seed
    generator per dataset, shared by its iterators: a second iterator continues where the
    first one (and its prefetching) left it. Under tf.distribute Keras iterates the training
    set twice (a peek, then training), so a resumed MirroredStrategy run trained on other
    batches than an uninterrupted one. Built inside `flat_map`, each iterator gets its own
    generator; a `cache()` in `examples` is still filled once and shared.
    """

    def stream(_):
        return examples.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=True).repeat()

    return tf.data.Dataset.range(1).flat_map(stream)


def _pad_rows_to_multiple(num_replicas: int):
    """Pad a batch with all-PAD rows to a multiple of `num_replicas` rows, so every replica
    gets a piece of a last partial (evaluation) batch. Masked metrics ignore PAD rows; the
    loss of a replica with only PAD rows is 0, a small bias of the dev loss only."""

    def pad(example):
        extra = -tf.shape(example["source"])[0] % num_replicas
        return {
            k: tf.pad(v, [[0, extra], [0, 0]], constant_values=PAD_ID) for k, v in example.items()
        }

    return pad


def _check_not_empty(examples: tf.data.Dataset, max_length: int) -> None:
    """Raise a ValueError naming `max_length` if no tokenized pair of `examples` is kept.

    Reads the stream up to its first element, before any `cache()`: a cache read only in part
    is discarded (with a warning from tf.data) and filled again.
    """
    if not bool(examples.take(1).reduce(False, lambda found, _: True)):
        raise ValueError(
            "No training pair has both sides within max_length (in subword pieces, EOS "
            f"included). Received: max_length={max_length}"
        )


def make_batches(
    pairs: tf.data.Dataset,
    tokenizer: SubwordTokenizer,
    max_length: int,
    batch_tokens: int,
    num_replicas: int = 1,
    training: bool = True,
    shuffle_buffer: int = 50_000,
    pad_to_bucket_boundary: bool = True,
    cache: bool = False,
    seed: int | None = None,
    skip_batches: int = 0,
) -> tf.data.Dataset:
    """Token-budget batches for `model.fit`.

    Args:
        pairs: `{"source", "target"}` string elements.
        tokenizer: the shared subword tokenizer.
        max_length: longest source or target (in pieces, EOS included) kept.
        batch_tokens: most padded source or target tokens per replica batch.
        num_replicas: replicas in sync; every batch has a multiple of it sentences.
        training: shuffle, repeat forever and drop incomplete batches; else one pass. Raises
            ValueError if no pair fits `max_length`.
        shuffle_buffer: tokenized examples shuffled before bucketing.
        pad_to_bucket_boundary: pad source and target to their bucket's upper length, so each
            bucket has one shape: the train step is traced once per bucket (and XLA compiles
            once per bucket) instead of once per new (batch, src_len, tgt_len) combination.
        cache: keep the tokenized corpus in memory after the first pass (small corpora).
        seed: shuffle seed (`shuffled_epochs`).
        skip_batches: batches of the stream to skip (those a resumed run already trained on).
    """
    examples = tokenize_pairs(pairs, tokenizer, max_length)
    if training:
        _check_not_empty(examples, max_length)
    if cache:
        examples = examples.cache()  # filled by the first full pass: never read partially
    if training:
        examples = shuffled_epochs(examples, shuffle_buffer, seed)
    batches = bucket_batches(
        examples, max_length, batch_tokens, num_replicas, pad_to_bucket_boundary, training
    )
    if ALIGNMENT in examples.element_spec:  # guided alignment: words -> pieces, per batch
        batches = batches.map(_densify_alignment(tokenizer), num_parallel_calls=tf.data.AUTOTUNE)
    if skip_batches:
        batches = batches.skip(skip_batches)
    return finish_batches(batches, num_replicas, training)


def bucket_layout(
    max_length: int, batch_tokens: int, num_replicas: int, pad_to_bucket_boundary: bool
) -> tuple[list[int], list[int]]:
    """`(boundaries, sentences per global batch of each bucket)` of `bucket_batches`: an
    example of length L (`max(source, labels)`) goes to bucket `sum(b <= L for b in
    boundaries)`."""
    boundaries = bucket_boundaries(max_length)
    if pad_to_bucket_boundary and boundaries[-1] <= max_length:
        boundaries.append(max_length + 1)  # tf.data needs every length below the last boundary
    return boundaries, bucket_batch_sizes(boundaries, max_length, batch_tokens, num_replicas)


def bucket_batches(
    examples: tf.data.Dataset,
    max_length: int,
    batch_tokens: int,
    num_replicas: int,
    pad_to_bucket_boundary: bool,
    drop_remainder: bool,
) -> tf.data.Dataset:
    """Tokenized examples (`source`, `target`, `labels` 1-D) -> length-bucketed, padded
    batches of at most `batch_tokens` tokens a replica (`bucket_layout`)."""
    boundaries, sizes = bucket_layout(
        max_length, batch_tokens, num_replicas, pad_to_bucket_boundary
    )
    return examples.bucket_by_sequence_length(
        element_length_func=lambda e: tf.maximum(tf.size(e["source"]), tf.size(e["labels"])),
        bucket_boundaries=boundaries,
        bucket_batch_sizes=sizes,
        padding_values={
            "source": PAD_ID,
            "target": PAD_ID,
            "labels": PAD_ID,
            **({ALIGNMENT: ""} if ALIGNMENT in examples.element_spec else {}),
        },  # fmt: skip
        pad_to_bucket_boundary=pad_to_bucket_boundary,
        drop_remainder=drop_remainder,
    )


def finish_batches(
    batches: tf.data.Dataset, num_replicas: int, training: bool, options=None
) -> tf.data.Dataset:
    """Bucketed batches -> `({"source", "target"}, labels)` for `model.fit`, prefetched, with
    `options` (default `_batch_options()`)."""
    if not training and num_replicas > 1:
        batches = batches.map(_pad_rows_to_multiple(num_replicas))
    batches = batches.map(
        lambda e: ({k: e[k] for k in ("source", "target", ALIGNMENT) if k in e}, e["labels"]),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return batches.prefetch(tf.data.AUTOTUNE).with_options(options or _batch_options())


def _densify_alignment(tokenizer: SubwordTokenizer):
    """A batch's `"alignment"` Moses lines over words -> float32 `(batch, tgt_len, src_len)`
    gold rows over pieces (`alignment_corpus.gold_matrix`)."""
    starts = alignment_corpus.word_start_table(tokenizer.model_proto)

    def densify(example):
        gold = alignment_corpus.gold_matrix(
            example[ALIGNMENT], example["source"], example["labels"], starts, PAD_ID, EOS_ID
        )
        return {**example, ALIGNMENT: gold}

    return densify


def _batch_options() -> tf.data.Options:
    """Deterministic order (the default, stated: exact resume relies on it) and sharding by
    data across workers."""
    options = tf.data.Options()
    options.deterministic = True
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return options


def through_data_service(batches: tf.data.Dataset, address: str) -> tf.data.Dataset:
    """`batches` produced by the tf.data service at `address` (a dispatcher,
    `grpc://HOST:PORT`): its workers run the whole pipeline, this process only receives the
    batches. Without sharding, each service worker produces the whole stream: with one worker
    the order is `batches`' own; with several, the client takes batches from them in turn
    (arrival order), so the stream is no longer indexed by step. The dataset's readers must be
    graph ops (TFRecords, TFDS): a Python generator cannot be sent to a worker."""
    service = tf.data.experimental.service
    distributed = batches.apply(
        service.distribute(processing_mode=service.ShardingPolicy.OFF, service=address)
    )
    return distributed.prefetch(tf.data.AUTOTUNE).with_options(_batch_options())
