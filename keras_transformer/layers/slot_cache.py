"""A beam search's self-attention cache that is never reordered (`decoding.incremental`).

Every row (beam q of item i) writes the key/value of its newest token at position t of its own
beam slot; when the search re-ranks beams, only `slots` changes: position s of the hypothesis
now in beam q lives in slot `slots[i, s, q]` (its ancestor's). Attention then scores all
`(t + 1) * beam` cached vectors of the item in one product per head and masks out those of
other hypotheses (`ancestor_mask`), instead of copying the cache by parent every step.

The keys/values grow by one position per step, and tensors are immutable, so each append
copies what it appends to. They are kept in two parts: `key`/`value` `(items, h, F, beam, d)`,
appended to only when the decoding loop merges the recent part into it
(`decoding.incremental.merge_recent`, every few steps), and `recent_key`/`recent_value`
`(items, h, R, beam, d)`, appended to at every step. A step copies R positions instead of all
t + 1, and attention reads both parts without joining them. `keras.ops` only, like every layer.
"""

from __future__ import annotations

import math

from keras import ops

from keras_transformer.layers.scaled_dot_product_attention import MASK_VALUE

PARTS = (("key", "value"), ("recent_key", "recent_value"))
NAMES = tuple(name for part in PARTS for name in part)


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
        cache: the layer's cache, the newest keys/values already appended.
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
