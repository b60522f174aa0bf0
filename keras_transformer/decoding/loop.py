"""The `tf.while_loop` plumbing shared by beam search and sampling.

Both decode through `symbols_to_logits_fn(ids, step, cache) -> (logits, new_cache)` (see
`beam_search`), keep their ids either growing by one column per step or in a fixed-size
buffer (`padded=True`, static shapes for XLA), and stop at per-item length limits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

SymbolsToLogitsFn = Callable[[tf.Tensor, tf.Tensor, Any], "tuple[tf.Tensor, Any]"]
NEG_INF = float("-inf")  # log-probability of dead beams and of filtered tokens


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
