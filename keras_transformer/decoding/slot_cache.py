"""A beam search's self-attention cache that is never reordered (`incremental.per_source_step`).

Every row (beam q of item i) writes the key/value of its newest token at position t of its own
beam slot; when the search re-ranks beams, only `slots` changes: position s of the hypothesis
now in beam q lives in slot `slots[i, s, q]` (its ancestor's). Attention then scores all
`(t + 1) * beam` cached vectors of the item in one product per head and masks out those of
other hypotheses (`ancestor_mask`), instead of copying the cache by parent every step.

The keys/values grow by one position per step, and tensors are immutable, so each append
copies what it appends to. They are kept in two parts: `key`/`value` `(items, h, F, beam, d)`,
appended to only when `merge_recent` moves the recent part into it (every `recent_positions`
steps), and `recent_key`/`recent_value` `(items, h, R, beam, d)`, appended to at every step. A
step copies R positions instead of all t + 1, and attention reads both parts without joining
them. `keras.ops` only, like the layers.
"""

from __future__ import annotations

import math

import tensorflow as tf
from keras import ops

from keras_transformer.layers.scaled_dot_product_attention import MASK_VALUE

PARTS = (("key", "value"), ("recent_key", "recent_value"))
NAMES = tuple(name for part in PARTS for name in part)
# The recent part is merged every this many steps: chosen by `benchmarks/run.py decode ab`
# (designs slots@8, slots@16, slots@32, slots@100000), in
# benchmarks/results/2026-11-25-decode-slot-cache.md, which has the command.
RECENT_POSITIONS = 16


def empty(items, num_heads: int, beam: int, key_dim: int, value_dim: int, dtype) -> dict:
    """A layer's cache before the first step: each part `(items, h, 0, beam, d)`."""
    depths = {"key": key_dim, "value": value_dim}
    depths.update({f"recent_{name}": depth for name, depth in depths.items()})
    return {name: tf.zeros([items, num_heads, 0, beam, d], dtype) for name, d in depths.items()}


def ancestor_mask(slots, beam: int):
    """bool `(items, beam, (t + 1) * beam)`: entry `[i, q, s * beam + j]` is True where slot
    j holds position s of the hypothesis in beam q, for int32 `slots (items, t + 1, beam)`.
    The layout is that of the keys `(items, h, t + 1, beam, d)` flattened to
    `(items, h, (t + 1) * beam, d)`, the older part first."""
    items, positions = ops.shape(slots)[0], ops.shape(slots)[1]
    slots = ops.transpose(slots, (0, 2, 1))  # -> (items, beam, t + 1)
    mask = ops.equal(ops.expand_dims(slots, -1), ops.arange(beam, dtype="int32"))
    return ops.reshape(mask, (items, beam, positions * beam))  # (items, q, (t + 1) * beam)


def append(cache: dict, new_key, new_value) -> dict:
    """Put the new keys/values `(items, h, 1, beam, d)` at the end of the recent part."""
    return {
        **cache,
        "recent_key": ops.concatenate([cache["recent_key"], new_key], axis=2),
        "recent_value": ops.concatenate([cache["recent_value"], new_value], axis=2),
    }


def _flat(x):
    """`(items, h, n, beam, d)` -> `(items, h, n * beam, d)`, position-major."""
    shape = ops.shape(x)
    return ops.reshape(x, (shape[0], shape[1], shape[2] * shape[3], x.shape[-1]))


def attend(q, cache: dict, mask):
    """softmax(q K^T / sqrt(d_k)) V over both parts of the cache, without joining them.

    Args:
        q: `(items, h, beam, d_k)`, the newest query of every beam, grouped by item.
        cache: a layer's cache, the newest keys/values already appended.
        mask: bool `(items, beam, (t + 1) * beam)` from `ancestor_mask`.

    Returns `(items, h, beam, d_v)` in the compute dtype."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    parts = [(_flat(cache[k]), _flat(cache[v])) for k, v in PARTS]
    scores = [ops.einsum("ihqd,ihkd->ihqk", q, key) for key, _ in parts]  # (i, h, beam, n_p)
    older = ops.shape(scores[0])[-1]
    scores = ops.cast(ops.concatenate(scores, axis=-1), "float32") * scale  # (i, h, beam, n)
    scores = ops.where(ops.expand_dims(mask, 1), scores, MASK_VALUE)
    weights = ops.cast(ops.softmax(scores, axis=-1), q.dtype)  # one fused kernel on TF
    split = [weights[..., :older], weights[..., older:]]
    return sum(ops.einsum("ihqk,ihkd->ihqd", w, value) for w, (_, value) in zip(split, parts))


def merge_recent(caches: list, recent_positions: int = RECENT_POSITIONS) -> list:
    """Move the recent part of every layer's cache to the end of its older part once it holds
    `recent_positions`: one `tf.cond` for all layers."""

    def merged(cache):
        return {
            "key": tf.concat([cache["key"], cache["recent_key"]], axis=2),
            "value": tf.concat([cache["value"], cache["recent_value"]], axis=2),
            "recent_key": cache["recent_key"][:, :, :0],
            "recent_value": cache["recent_value"][:, :, :0],
        }

    full = tf.shape(caches[0]["recent_key"])[2] >= recent_positions
    return tf.cond(full, lambda: [merged(c) for c in caches], lambda: [dict(c) for c in caches])


def reorder_slots(cache: dict, parents) -> dict:
    """The `reorder_cache` of `per_source_step`: the hypothesis now in beam q of an item
    continues the one in beam `parents[:, q]` (int32 `(items, beam)`), so its positions live
    where that one's did. Only the int32 slots move, `(items, t, beam)`."""
    slots = tf.gather(cache["slots"], parents, axis=2, batch_dims=1)  # (items, t, beam)
    return {**cache, "slots": slots}
