"""Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V  (paper, equation 1)."""

from __future__ import annotations

import math

import keras
from keras import ops

# Added to the scores of masked positions before the softmax. Softmax runs in float32, where
# exp(-1e9 - max) is exactly 0, so masked keys get exactly zero weight (padding is inert).
MASK_VALUE = -1e9


@keras.saving.register_keras_serializable(package="keras_transformer")
class ScaledDotProductAttention(keras.layers.Layer):
    """Scaled dot-product attention over heads, with a boolean mask.

    Args:
        dropout: dropout rate on the attention weights (the paper uses 0).

    Call arguments:
        query: `(batch, num_heads, q_len, d_k)`.
        key: `(batch, num_heads, k_len, d_k)`.
        value: `(batch, num_heads, k_len, d_v)`.
        attention_mask: optional boolean tensor broadcastable to `(batch, num_heads, q_len, k_len)`;
            True where a query may attend to a key.
        training: whether dropout is active.

    Returns:
        `(output, weights)`: `(batch, num_heads, q_len, d_v)` and the float32 weights
        `(batch, num_heads, q_len, k_len)`.

    Example:
    >>> attend = ScaledDotProductAttention()
    >>> q = k = v = keras.random.normal((2, 8, 5, 64))
    >>> out, weights = attend(q, k, v)
    """

    def __init__(self, dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1). Received: dropout={dropout}")
        self.dropout = dropout
        self._dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def call(self, query, key, value, attention_mask=None, training=None):
        d_k = ops.shape(query)[-1]
        scale = 1.0 / math.sqrt(d_k)
        # (batch, h, q_len, d_k) x (batch, h, k_len, d_k) -> (batch, h, q_len, k_len)
        scores = ops.einsum("bhqd,bhkd->bhqk", query, key)
        scores = ops.cast(scores, "float32") * scale
        if attention_mask is not None:
            scores = ops.where(ops.cast(attention_mask, "bool"), scores, MASK_VALUE)
        # softmax, written out: ops.softmax warns on the size-1 key axis of a first cached step.
        weights = ops.exp(scores - ops.logsumexp(scores, axis=-1, keepdims=True))
        dropped = self._dropout_layer(ops.cast(weights, self.compute_dtype), training=training)
        # (batch, h, q_len, k_len) x (batch, h, k_len, d_v) -> (batch, h, q_len, d_v)
        output = ops.einsum("bhqk,bhkd->bhqd", dropped, value)
        return output, weights

    def get_config(self):
        config = super().get_config()
        config.update({"dropout": self.dropout})
        return config
