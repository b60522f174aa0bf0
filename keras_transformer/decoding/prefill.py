"""A target prefix run through the decoder once (teacher forcing) to fill a guided search's
self-attention cache, instead of one loop step per forced piece.

    length = shortest_prefix(guide.prefix_lengths)        # P: every item has P forced pieces
    step, log_probs = fill_cache(model, step, guide.prefix_ids[:, :length], bos_id)
    strategy = GuidedBeamSearch(vocab, options, guide, prefill=Prefill(length, log_probs))
    ids, scores = decode(strategy, step, bos, max_len, loop, start_step=length, ...)

One decoder pass over `[BOS, p_0 .. p_{P-2}]` (causal self-attention) computes the keys and
values of positions 0..P-1 of every layer, and the logits at those positions give
`log P(p_0 .. p_{P-1} | x)`, the single live beam's start score: final scores are the
step-by-step search's (they count the prefix's tokens). The loop then starts at step P.

A batch shares one loop step, so P is the batch's shortest prefix: the items with longer
prefixes force their remaining pieces step by step, as before (a single request, the
interactive case, never takes a loop step per prefix piece).

Both step designs of `incremental`: the production `per_source_step` (its `slot_cache`: the P
positions are written into every beam slot, which each beam reads as its own) and
`fixed_shape_step` (the fixed buffers written at positions 0..P-1).
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.decoding.loop import StepFunction


class Prefill(NamedTuple):
    """What the cache already holds when the loop starts."""

    length: tf.Tensor  # int32: () forced pieces of every item already decoded (P)
    log_probs: tf.Tensor  # float32: (batch,) log P(p_0 .. p_{P-1} | x) of each item


def shortest_prefix(prefix_lengths) -> tf.Tensor:
    """int32 `()`: the fewest forced pieces of any item of `prefix_lengths (batch,)` (0 for an
    empty batch)."""
    lengths = tf.cast(prefix_lengths, tf.int32)
    return tf.cond(tf.size(lengths) > 0, lambda: tf.reduce_min(lengths), lambda: 0)


def teacher_forced(model, prefix_ids, bos_id: int, memory_mask, layer_caches,
                   cache_update_index=None):  # fmt: skip
    """`Transformer.decode` of `[BOS, p_0 .. p_{P-2}]` for `prefix_ids (batch, P)`:
    `(log_probs (batch,) of the P pieces, the new per-layer caches)`."""
    prefix_ids = tf.cast(prefix_ids, tf.int32)
    batch = tf.shape(prefix_ids)[0]
    inputs = tf.concat([tf.fill([batch, 1], bos_id), prefix_ids], axis=1)  # (batch, P + 1)
    inputs = inputs[:, : tf.shape(prefix_ids)[1]]  # -> (batch, P): [BOS, p_0 .. p_{P-2}]
    logits, caches = model.decode(inputs, memory_mask, layer_caches, cache_update_index)
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))  # (batch, P, vocab)
    chosen = tf.gather(log_probs, prefix_ids, batch_dims=2)  # (batch, P)
    return tf.reduce_sum(chosen, axis=1), caches


def fill_cache(
    model, step: StepFunction, prefix_ids, bos_id: int
) -> tuple[StepFunction, tf.Tensor]:
    """`step` (from `incremental.per_source_step` or `fixed_shape_step`) with its cache holding
    the prefix `prefix_ids (batch, P)`, and the prefix's log-probabilities `(batch,)`. P may be
    0 (nothing is decoded then)."""
    fill = _fill_fixed if step.reorder_cache is None else _fill_slots
    cache, log_probs = fill(model, step, prefix_ids, bos_id)
    return step._replace(cache=cache), log_probs


def _fill_fixed(model, step: StepFunction, prefix_ids, bos_id: int):
    """Fixed buffers `(batch, h, max_len, d)`: positions 0..P-1 written in place."""
    layers = [{"self": s, "cross": c} for s, c in zip(step.cache, step.shared["cross"])]
    log_probs, caches = teacher_forced(model, prefix_ids, bos_id, step.shared["mask"], layers, 0)
    return [layer["self"] for layer in caches], log_probs


def _fill_slots(model, step: StepFunction, prefix_ids, bos_id: int):
    """A `slot_cache`: the P positions in the older part of every beam slot, `slots` saying
    that beam q reads them from slot q."""
    layers = step.cache["layers"]
    beam = tf.shape(step.cache["slots"])[2]
    empty = [
        {"key": layer["key"][:, :, :, 0], "value": layer["value"][:, :, :, 0]} for layer in layers
    ]  # each (items, h, 0, d)
    growing = [{"self": s, "cross": c} for s, c in zip(empty, step.shared["cross"])]
    log_probs, caches = teacher_forced(model, prefix_ids, bos_id, step.shared["mask"], growing)

    def per_beam(x):  # (items, h, P, d) -> (items, h, P, beam, d)
        return tf.tile(x[:, :, :, None, :], [1, 1, 1, beam, 1])

    filled = [
        {**layer, "key": per_beam(new["self"]["key"]), "value": per_beam(new["self"]["value"])}
        for layer, new in zip(layers, caches)
    ]
    items, length = tf.shape(prefix_ids)[0], tf.shape(prefix_ids)[1]
    own = tf.range(beam)[None, None, :]  # (1, 1, beam): beam q in slot q
    slots = tf.tile(own, [items, length, 1])  # (items, P, beam)
    return {"slots": slots, "layers": filled}, log_probs
