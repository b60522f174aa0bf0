"""Small inputs for layer tests: the sizes they share, random arrays, masks, random weights.

x = normal(rng, BATCH, SRC_LEN, D_MODEL)  # (batch, src_len, d_model) float32
mask = padding_mask([SRC_LEN, 3], SRC_LEN)  # the second sentence is padded
"""

from __future__ import annotations

import keras
import numpy as np

BATCH, TGT_LEN, SRC_LEN, D_MODEL, HEADS, D_FF, VOCAB = 2, 4, 6, 16, 2, 32, 50
KEY_DIM = D_MODEL // HEADS


def normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Standard normal float32 values of `shape`."""
    return rng.normal(size=shape).astype("float32")


def padding_mask(lengths, max_len: int) -> np.ndarray:
    """Boolean `(batch, max_len)`, True for the first `lengths[b]` positions."""
    return np.arange(max_len)[None, :] < np.asarray(lengths)[:, None]


def causal_mask(length: int) -> np.ndarray:
    """Boolean `(length, length)`, True where query i may attend to key j (j <= i)."""
    return np.tril(np.ones((length, length), bool))


def randomize(layer: keras.layers.Layer, rng: np.random.Generator, scale: float = 0.3) -> None:
    """Random weights everywhere (biases, gamma and beta included) so the references see them."""
    layer.set_weights([rng.normal(scale=scale, size=w.shape) for w in layer.get_weights()])


def to_np(x) -> np.ndarray:
    """A tensor of the current backend as a NumPy array."""
    return keras.ops.convert_to_numpy(x)
