"""The `tf.while_loop` plumbing shared by beam search and sampling.

Both decode through `symbols_to_logits_fn(ids, step, cache[, shared]) -> (logits, new_cache)`
(see `beam_search`), keep their ids either growing by one column per step or in a fixed-size
buffer (`padded=True`, static shapes for XLA), and stop at per-item length limits.

Shrinking (growing mode only): the live rows are the items still decoding, `items` maps
them to their original index, and the finished items' results wait in full-batch `Outputs`
(scattered there by original index when their rows are dropped, and for the rest after the
loop), so finished items stop costing compute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

SymbolsToLogitsFn = Callable[..., "tuple[tf.Tensor, Any]"]  # (ids, step, cache[, shared])
NEG_INF = float("-inf")  # log-probability of dead beams and of filtered tokens
SHRINK_THRESHOLD = 0.25  # drop finished items' rows once this fraction of live ones finished


def length_limits(initial_ids, max_decode_length, max_lengths=None):
    """`(max_len () int32, limits (batch,) int32)`: per-item limits capped at the buffer."""
    max_len = tf.cast(max_decode_length, tf.int32)
    limits = tf.fill(tf.shape(initial_ids)[:1], max_len)  # (batch,)
    if max_lengths is not None:
        limits = tf.minimum(tf.cast(max_lengths, tf.int32), max_len)
    return max_len, limits


def start_ids(ids, max_len, padded: bool, pad_id: int):
    """`ids (..., 1)` holding the initial id -> `(..., max_len + 1)` when padded, else as is."""
    if not padded:
        return ids
    paddings = [[0, 0]] * (ids.shape.rank - 1) + [[0, max_len]]
    return tf.pad(ids, paddings, constant_values=pad_id)


def write_token(ids, tokens, position, padded: bool, pad_id: int):
    """Put `tokens (batch, k)` at `position` of `ids (batch, k, length)`."""
    if not padded:
        return tf.concat([ids, tokens[:, :, None]], axis=2)  # -> (batch, k, length + 1)
    at = tf.equal(tf.range(tf.shape(ids)[2]), position)  # (length,)
    return tf.where(at[None, None, :], tokens[:, :, None], ids)  # (batch, k, length)


def growing_shape(tensor) -> tf.TensorShape:
    """Shape invariant of a growing loop variable: every dimension free but the last."""
    shape = tensor.shape
    return tf.TensorShape([None] * (shape.rank - 1) + [shape[-1]])


def shrinking_cache_shape(tensor) -> tf.TensorShape:
    """Shape invariant of a cache tensor `(rows, ...)` whose rows may be dropped: the
    growing shape with the row axis free too."""
    return tf.TensorShape([None]).concatenate(growing_shape(tensor)[1:])


def shrinking_shape(tensor) -> tf.TensorShape:
    """Shape invariant of a `(rows, ...)` loop variable whose rows may be dropped."""
    return tf.TensorShape([None]).concatenate(tensor.shape[1:])


def free_last_axis(tensor) -> tf.TensorShape:
    """Shape invariant of growing ids: the last (length) axis free."""
    return tf.TensorShape(tensor.shape[:-1] + [None])


def run_loop(keep_going, step_fn, state, padded: bool, growing: dict, max_len):
    """`tf.while_loop` over a NamedTuple `state`, at most `max_len` iterations.

    `growing` maps field names to their shape invariants in growing mode (ignored when
    `padded`, where every shape is static)."""
    invariants = tf.nest.map_structure(lambda t: t.shape, state)
    if not padded:
        invariants = invariants._replace(**growing)
    return tf.while_loop(
        keep_going,
        lambda s: (step_fn(s),),
        (state,),
        shape_invariants=(invariants,),
        maximum_iterations=max_len,
    )[0]


def bind_shared(fn, shared, carried: bool):
    """`(call, state_shared)` with `call(ids, step, cache, state_shared)` calling `fn`.

    `shared` None: `fn(ids, step, cache)` (per-item state, if any, lives in its closure).
    Otherwise `fn(ids, step, cache, shared)`, `shared` carried in the loop state when
    `carried` (so that finished items' rows can be dropped), else captured as a constant."""
    if shared is None:
        return (lambda ids, step, cache, _: fn(ids, step, cache)), ()
    if carried:
        return fn, shared
    return (lambda ids, step, cache, _: fn(ids, step, cache, shared)), ()


def check_shrink_threshold(threshold) -> None:
    """TypeError / ValueError unless `threshold` is a Python number in [0, 1]."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise TypeError(
            f"shrink_threshold must be a number. Received: shrink_threshold={threshold!r}"
        )
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(
            f"shrink_threshold must be in [0, 1]. Received: shrink_threshold={threshold!r}"
        )


class Outputs(NamedTuple):
    """The results of a shrinking loop, by original item."""

    items: tf.Tensor  # int32: (active,) original item of each live row
    ids: tf.Tensor  # int32: (batch, ..., out_length); rows of dropped items are final
    scores: tf.Tensor  # float32: (batch, ...)


def initial_outputs(batch, ids_shape, scores_shape, pad_id: int) -> Outputs:
    """Empty `Outputs` for `batch` items: ids `(batch, *ids_shape)`, scores
    `(batch, *scores_shape)` (every item is stored before the end, so the contents only
    fill the shape)."""
    ids_shape = tf.concat([[batch], tf.constant(ids_shape, tf.int32)], 0)
    scores_shape = tf.concat([[batch], tf.constant(scores_shape, tf.int32)], 0)
    return Outputs(
        items=tf.range(batch),
        ids=tf.fill(ids_shape, tf.constant(pad_id, tf.int32)),  # (batch, *ids_shape)
        scores=tf.zeros(scores_shape),  # (batch, *scores_shape)
    )


def outputs_shape(outputs: Outputs) -> Outputs:
    """Shape invariants of `Outputs` in a loop: fewer live items, longer stored ids."""
    return Outputs(tf.TensorShape([None]), free_last_axis(outputs.ids), outputs.scores.shape)


def store(outputs: Outputs, rows, ids, scores, pad_id: int) -> Outputs:
    """Write the final `ids (n, ..., length)` and `scores (n, ...)` of live `rows (n,)` to
    their items' places; the stored ids are padded with `pad_id` to `length` first."""
    width = tf.shape(ids)[-1]
    out_ids = outputs.ids
    rank = out_ids.shape.rank
    extra = tf.maximum(width - tf.shape(out_ids)[-1], 0)
    out_ids = tf.pad(out_ids, [[0, 0]] * (rank - 1) + [[0, extra]], constant_values=pad_id)
    index = tf.gather(outputs.items, rows)[:, None]  # (n, 1) original items
    return outputs._replace(
        ids=tf.tensor_scatter_nd_update(out_ids, index, ids),  # (batch, ..., length)
        scores=tf.tensor_scatter_nd_update(outputs.scores, index, scores),
    )


def should_compact(done, threshold: float) -> tf.Tensor:
    """Drop the rows of finished items now? `done` bool `(active,)`: yes when at least
    `threshold` of them (and at least one) finished and some are still decoding."""
    count = tf.reduce_sum(tf.cast(done, tf.int32))
    active = tf.size(done)
    enough = tf.cast(count, tf.float32) >= threshold * tf.cast(active, tf.float32)
    return (count > 0) & (count < active) & enough


def row_index(mask) -> tf.Tensor:
    """int32 `(n,)` positions where the bool `(active,)` mask is true."""
    return tf.cast(tf.where(mask)[:, 0], tf.int32)


def gather_rows(nest, rows):
    """Every tensor of `nest` `(rows, ...)` -> `(len(rows), ...)`."""
    return tf.nest.map_structure(lambda t: tf.gather(t, rows, axis=0), nest)
