"""Translation ids in, ids out, TF ops only (XLA-compatible with `padded_decode`): beam search
(`translate_ids`, `search_ids`), greedy decoding and top-k / top-p sampling (`sample_ids`),
with the paper's settings by default (beam 4, alpha 0.6, at most source length + 50 output
tokens). `decoding.translator.Translator` wraps them with strings in, strings out.

    ids, scores = translate_ids(model, source_ids)                 # (batch, len), (batch,)
    ids, scores = search_ids(model, source_ids, SearchOptions(n_best=4))  # (batch, 4, len)
    ids, scores = sample_ids(model, source_ids, SearchOptions(), "sample", top_p=0.9, seed=7)

Lengths. Each function takes one source per row: a source longer than the model's
`max_length` is cut to `max_length - 1` tokens plus EOS (eager calls of `translate_ids` log
one warning, logger "keras_transformer"). An empty source is just [EOS]. Output lengths count
generated tokens with EOS: each source may produce at most `min(source length +
max_extra_length, max_length)` tokens (the decoder's positions stop at the model's
`max_length`); one that reaches it without EOS is finished there.

Ids. `translate_ids` refuses an id outside `[0, vocab_size)` with an error that names it
(`check_source_ids`: an embedding lookup would wrap a negative id around); `search_ids` and
`sample_ids`, the numeric cores a `Translator` runs (under XLA too), take ids its tokenizer made.
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from keras_transformer.config import SearchOptions
from keras_transformer.constants import PAD_ID
from keras_transformer.decoding import incremental, padded_kernels
from keras_transformer.decoding.beam_search import BeamSearch, length_penalty
from keras_transformer.decoding.incremental import fixed_shape_step, per_source_step
from keras_transformer.decoding.loop import LoopOptions, Strategy, decode
from keras_transformer.decoding.sampling import Sampling, SamplingOptions
from keras_transformer.model import Transformer

logger = logging.getLogger("keras_transformer")


def check_model(model) -> Transformer:
    if not isinstance(model, Transformer):
        raise TypeError(
            "model must be a keras_transformer Transformer (build_transformer, a loaded .keras "
            f"file or load_trained). Received: {type(model).__name__}"
        )
    return model


def prepare_source(source_ids, config) -> tuple[tf.Tensor, tf.Tensor]:
    """Right-padded source ids `(batch, src_len)` (dense or ragged) -> `(ids, lengths)`.

    Rows longer than `config.max_length` keep `max_length - 1` tokens and end with EOS; an
    empty row becomes [EOS]. Returns int32 `(batch, min(src_len, max_length))` (at least one
    column) and the int32 lengths `(batch,)`, EOS included."""
    if isinstance(source_ids, tf.RaggedTensor):
        source_ids = source_ids.to_tensor(default_value=config.pad_id)
    ids = tf.cast(tf.convert_to_tensor(source_ids), tf.int32)
    if ids.shape.rank != 2:
        raise ValueError(f"source_ids must be (batch, src_len). Received shape {ids.shape}")
    ids = tf.pad(ids, [[0, 0], [0, tf.maximum(1 - tf.shape(ids)[1], 0)]],
                 constant_values=config.pad_id)  # fmt: skip  # at least one column
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(ids, config.pad_id), tf.int32), axis=1)
    ids = ids[:, : config.max_length]
    columns = tf.range(tf.shape(ids)[1])[None, :]  # (1, src_len)
    cut = (lengths > config.max_length)[:, None] & tf.equal(columns, config.max_length - 1)
    empty = tf.equal(lengths, 0)[:, None] & tf.equal(columns, 0)
    ids = tf.where(cut | empty, config.eos_id, ids)
    return ids, tf.clip_by_value(lengths, 1, config.max_length)


def decode_sources(
    model: Transformer,
    source_ids,
    options: SearchOptions,
    strategy: Strategy,
    pad_kernels: bool | None = None,
    transpose_kernels: bool = False,
    rows=None,
    output_kernel=None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """`loop.decode` with `strategy` over the cached decoder of `model`, TF ops only
    (XLA-compatible with padded_decode): right-padded source ids are prepared
    (`prepare_source`), encoded once, and each may produce at most `min(source length +
    options.max_extra_length, max_length)` tokens; with growing buffers the cache is per source
    (`incremental.per_source_step`: never tiled by beam nor copied to reorder it) and finished
    sources' rows are dropped; with `padded_decode`, `incremental.fixed_shape_step`.
    `pad_kernels` (growing buffers only): whether the step multiplies by padded copies of the
    decoder's weights (`decoding.padded_kernels`); None: `padded_kernels.default_pad_kernels()`.
    `transpose_kernels` (fixed buffers, XLA only): `incremental.fixed_shape_step`'s.
    `rows` (int32 scalar, default all): only the first `rows` sources are decoded; the others
    (padding rows under XLA) get a length limit of 0, done before the first step.
    `output_kernel` (fixed buffers only): `incremental.fixed_shape_step`'s, `E^T` made once
    outside the search.

    Returns the strategy's `(ids, scores)`, ids with BOS first."""
    config = model.config
    source, lengths = prepare_source(source_ids, config)
    memory, memory_mask = model.encode(source)  # once per batch
    limits = tf.minimum(lengths + options.max_extra_length, config.max_length)  # (batch,)
    if rows is not None:
        limits = tf.where(tf.range(tf.shape(limits)[0]) < rows, limits, 0)
    # Static under XLA: computed from the (padded) source width, not from its values.
    max_len = tf.minimum(tf.shape(source)[1] + options.max_extra_length, config.max_length)
    loop = LoopOptions(config.eos_id, config.pad_id, padded=options.padded_decode)
    bos_ids = tf.fill(tf.shape(source)[:1], config.bos_id)  # (batch,)
    if options.padded_decode:  # fixed-size buffers, reordered by gather (XLA's layout)
        step = fixed_shape_step(
            model, memory, memory_mask, max_len, transpose_kernels, output_kernel
        )
    else:  # a per-source cache that is never copied to reorder it
        if pad_kernels is None:
            pad_kernels = padded_kernels.default_pad_kernels()
        step = per_source_step(
            model, memory, memory_mask, strategy.rows_per_item, pad_kernels=pad_kernels
        )
    return decode(strategy, step, bos_ids, max_len, loop, max_lengths=limits)


# Under XLA (`jit_compile`) every new source shape compiles the search again (seconds): the
# translator pads the width to a multiple of this and the batch to a power of two (copies of
# its first row, which finish when it does), so at most max_length / 16 widths times
# log2(batch) batch sizes compile. Padding is inert (encoder masks, per-sentence length
# limits, the copies' outputs dropped): the outputs do not change.
XLA_WIDTH_MULTIPLE = 16

# A `jit_compile` translator's beam search runs XLA over fixed buffers for batches of at most
# this many rows and the growing search (no XLA) for larger ones, where the fixed buffers cost
# more (measured: benchmarks/results/2026-11-29-issue-54-xla-rows.md). 4: the largest batch
# not slower under XLA at either size measured, and the largest the export's warm-up compiles
# (a sentence cut in up to 4 parts), so no larger batch compiles while served.
XLA_MAX_ROWS = 4


def pad_width(source_ids, multiple: int) -> tf.Tensor:
    """Int32 source ids `(batch, src_len)` right-padded with `PAD_ID` to the next multiple
    of `multiple` columns -> `(batch, ceil(src_len / multiple) * multiple)`."""
    if isinstance(source_ids, tf.RaggedTensor):
        source_ids = source_ids.to_tensor(default_value=PAD_ID)
    width = tf.shape(source_ids)[1]
    extra = (multiple - width % multiple) % multiple
    return tf.pad(source_ids, [[0, 0], [0, extra]], constant_values=PAD_ID)


def pad_rows(source_ids) -> tf.Tensor:
    """Int32 source ids `(batch, src_len)` with copies of the first row appended up to the
    next power of two rows -> `(2 ** ceil(log2(batch)), src_len)`; no rows stay none."""
    batch = tf.shape(source_ids)[0]
    target = batch - 1  # the next power of two at or above batch, in integer ops
    for shift in (1, 2, 4, 8, 16):
        target = tf.bitwise.bitwise_or(target, tf.bitwise.right_shift(target, shift))
    copies = tf.repeat(source_ids[:1], target + 1 - batch, axis=0)  # (target + 1 - batch, len)
    return tf.concat([source_ids, copies], axis=0)


def search_ids(
    model: Transformer,
    source_ids,
    options: SearchOptions,
    pad_kernels: bool | None = None,
    transpose_kernels: bool = False,
    output_kernel=None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """The numeric core of `translate_ids`: beam search with `options` (`pad_kernels`,
    `transpose_kernels` and `output_kernel` as in `decode_sources`).

    Returns int32 `(batch, n_best, max_len)` ids without BOS, `pad_id` after EOS, and float32
    `(batch, n_best)` scores."""
    beam = BeamSearch(model.config.vocab_size, options)
    ids, scores = decode_sources(
        model, source_ids, options, beam, pad_kernels, transpose_kernels,
        output_kernel=output_kernel,
    )  # fmt: skip
    return ids[:, :, 1:], scores  # drop BOS -> (batch, n_best, max_len)


def seed_pair(seed) -> tf.Tensor:
    """An int scalar (Python or tensor) -> the int64 `(2,)` seed `[seed, 0]` of the stateless
    random ops; a pair is kept as is."""
    seed = tf.cast(seed, tf.int64)
    return tf.stack([seed, tf.zeros_like(seed)]) if seed.shape.rank == 0 else seed


def sample_ids(
    model: Transformer,
    source_ids,
    options: SearchOptions,
    method: str = "greedy",
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=0,
    pad_kernels: bool | None = None,
    transpose_kernels: bool = False,
    rows=None,
    bisect: bool = False,
    output_kernel=None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Greedy or sampled decoding of right-padded source ids, TF ops only: the sampling
    counterpart of `search_ids` (same source preparation and output length limits, taken from
    `options`; `method` and knobs as in `decoding.sampling.SamplingOptions`, seed an int or a
    pair; `pad_kernels`, `transpose_kernels`, `output_kernel` and `rows` as in
    `decode_sources`: padding rows draw tokens of their own, so unlike beam search's copies
    they would not finish with the row they copy; `bisect`: `SamplingOptions.bisect`, for
    XLA).

    Returns int32 `(batch, max_len)` ids without BOS, `pad_id` after EOS, and float32
    `(batch,)` scores log P(y | x) / lp(|y|) with `options.alpha`, as beam search scores."""
    config = model.config
    sampling = SamplingOptions(
        method, top_k, top_p, temperature, seed=seed_pair(seed), bisect=bisect
    )
    ids, log_probs = decode_sources(
        model, source_ids, options, Sampling(sampling), pad_kernels, transpose_kernels, rows,
        output_kernel,
    )  # fmt: skip
    ids = ids[:, 1:]  # drop BOS -> (batch, max_len)
    length = tf.reduce_sum(tf.cast(tf.not_equal(ids, config.pad_id), tf.int32), axis=1)
    return ids, log_probs / length_penalty(length, options.alpha)


def warn_if_truncated(lengths, max_length: int) -> bool:
    """Eagerly, log one warning if some source lengths `(batch,)` (EOS included) exceed
    `max_length`; returns whether it did (never when traced: an export truncates silently)."""
    if not tf.executing_eagerly():
        return False
    count = int(np.sum(np.asarray(lengths) > max_length))
    if count:
        logger.warning(
            "%d source(s) longer than the model's max_length=%d tokens were truncated to "
            "max_length.", count, max_length,
        )  # fmt: skip
    return bool(count)


def check_source_ids(source_ids, vocab_size: int):
    """An id outside `[0, vocab_size)` would read a wrong embedding row (a negative one wraps
    around, and on a GPU a large one reads zeros): eagerly a ValueError that names the first
    such id; in a graph, the assertion to run first (InvalidArgumentError, the same message;
    XLA drops assertions). Dense or ragged ids."""
    if isinstance(source_ids, tf.RaggedTensor):
        source_ids = source_ids.flat_values
    flat = tf.reshape(tf.cast(source_ids, tf.int64), [-1])
    bad = (flat < 0) | (flat >= vocab_size)
    first = tf.concat([tf.boolean_mask(flat, bad), [0]], 0)[0]
    message = f"source_ids must be in [0, vocab_size={vocab_size}). Received: an id "
    if tf.executing_eagerly():
        if bool(tf.reduce_any(bad)):
            raise ValueError(f"{message}{int(first)}")
        return tf.no_op()
    return tf.debugging.Assert(~tf.reduce_any(bad), [message, first])


def translate_ids(
    model: Transformer, source_ids, search: SearchOptions | None = None
) -> tuple[tf.Tensor, tf.Tensor]:
    """Beam-search translations of right-padded source ids (see the module docstring for
    lengths, truncation and empty sources).

    Args:
        model: a `Transformer` (its `config` gives the special ids and max_length).
        source_ids: int `(batch, src_len)`, `pad_id` after each source's EOS, or ragged.
        search: beam size, alpha, extra length, n-best, padded decoding, early stopping
            (default: the paper's settings, `SearchOptions()`).

    Returns:
        `(ids, scores)`: int32 `(batch, len)` and float32 `(batch,)` when `search.n_best` is
        1, else `(batch, n_best, len)` and `(batch, n_best)`, best first. Ids exclude BOS,
        end with EOS (unless cut by the length limit) and are padded with `pad_id`; trailing
        all-pad columns are dropped. Scores are log P(y | x) / ((5 + |y|) / 6) ** alpha, |y|
        counting EOS.
    """
    config = check_model(model).config
    search = search or SearchOptions()
    with tf.control_dependencies([check_source_ids(source_ids, config.vocab_size)]):
        ids, scores = _translate_ids(model, source_ids, search)
    return ids, scores


def _translate_ids(model: Transformer, source_ids, search: SearchOptions):
    config = model.config
    if tf.executing_eagerly():
        dense = source_ids
        if isinstance(dense, tf.RaggedTensor):
            dense = dense.to_tensor(default_value=config.pad_id)
        warn_if_truncated(np.sum(np.asarray(dense) != config.pad_id, axis=-1), config.max_length)
    ids, scores = search_ids(model, source_ids, search)
    used = tf.reduce_any(tf.not_equal(ids, config.pad_id), axis=[0, 1])  # (len,)
    width = tf.reduce_max(tf.concat([tf.where(used)[:, 0] + 1, [0]], 0))
    ids = ids[:, :, :width]  # -> (batch, n_best, width)
    if search.n_best == 1:
        return ids[:, 0], scores[:, 0]  # -> (batch, width), (batch,)
    return ids, scores


def default_pad_kernels(padded_decode: bool) -> bool:
    """Whether a `Translator` pads the decoder's kernels by default: this machine's rule
    (`padded_kernels.default_pad_kernels`), for the growing search only."""
    return padded_kernels.default_pad_kernels() and not padded_decode


def default_transpose_kernels(d_model: int, jit_compile: bool) -> bool:
    """Whether a `Translator` of a model of width `d_model` reads the decoder's kernels
    transposed by default: under XLA only, this machine's rule
    (`incremental.transposed_kernels_pay`)."""
    return jit_compile and incremental.transposed_kernels_pay(d_model)
