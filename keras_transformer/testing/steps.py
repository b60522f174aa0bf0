"""Toy step functions for the decoding loop's tests: a step function written with a row per
hypothesis (`fn(ids, step, cache, shared) -> (logits, cache)`, every tensor `(rows, ...)`)
adapted to either design of `decoding.loop` (see its module docstring)."""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.decoding.loop import StepFunction, tile_items


def _rows(t):
    """`(items, k, ...)` -> `(items * k, ...)`."""
    return tf.reshape(t, tf.concat([[-1], tf.shape(t)[2:]], 0))


def row_step(fn, cache, shared=(), rows_per_item: int = 1, padded: bool = False) -> StepFunction:
    """A `StepFunction` for `fn`, its per-item initial `cache` and `shared` `(batch, ...)`.

    `padded`: the fixed-size design (the loop tiles both by `rows_per_item` and reorders the
    cache's rows). Otherwise the growing design: the cache is kept as `(items,
    rows_per_item, ...)`, reordered within each item by gather (`reorder_cache`), and `fn`
    sees it and `shared` as rows."""
    if padded:
        return StepFunction(fn, cache, shared)
    k = rows_per_item

    def per_item_fn(ids, step, cache, shared):
        logits, cache = fn(ids, step, tf.nest.map_structure(_rows, cache), tile_items(shared, k))
        shape = lambda t: tf.concat([[-1, k], tf.shape(t)[1:]], 0)  # noqa: E731
        return logits, tf.nest.map_structure(lambda t: tf.reshape(t, shape(t)), cache)

    def reorder_cache(cache, parents):  # parents: int32 (items, k) within each item
        return tf.nest.map_structure(lambda t: tf.gather(t, parents, batch_dims=1), cache)

    by_item = tf.nest.map_structure(lambda t: tf.stack([t] * k, axis=1), cache)  # (b, k, ...)
    return StepFunction(per_item_fn, by_item, shared, reorder_cache)


def stateless_step(logits_fn, rows_per_item: int = 1, padded: bool = False) -> StepFunction:
    """A `StepFunction` of `logits_fn(ids, step) -> (rows, vocab)`, which keeps no state."""
    return row_step(lambda ids, step, cache, _: (logits_fn(ids, step), cache), {}, (),
                    rows_per_item, padded)  # fmt: skip
