"""MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,
head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)  (paper, section 3.2.2)."""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.layers.scaled_dot_product_attention import ScaledDotProductAttention


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention with learned W_Q, W_K, W_V per head and W_O, and a key/value cache.

    The per-head projections W_Q_i (d_model x d_k) are stored side by side in one
    (d_model, num_heads * d_k) kernel, which is the same linear map.

    Args:
        num_heads: h.
        key_dim: d_k, width of queries and keys per head.
        value_dim: d_v, width of values per head (default key_dim).
        dropout: dropout on the attention weights (the paper uses 0).
        use_bias: whether the four projections have biases.

    Call arguments:
        query: `(batch, q_len, d_model)`.
        value: `(batch, k_len, d_model)`; None only with a precomputed `cache`.
        key: `(batch, k_len, d_model)`, default `value`.
        attention_mask: boolean, broadcastable to `(batch, q_len, k_len)`; True = may attend.
        cache: None (the paper's formula), or `{"key": (batch, num_heads, cache_len, d_k),
            "value": (batch, num_heads, cache_len, d_v)}`:
            - with `value=None`, precomputed keys/values (encoder-decoder attention, projected
              once with `project_key_value`), returned unchanged;
            - with `value` given (self-attention), the new keys/values of `value` are
              appended: concatenated (the cache grows by `q_len`) when `cache_update_index`
              is None, or written into the fixed-size cache at `cache_update_index` (static
              shapes, for XLA).
        cache_update_index: int or scalar tensor, see `cache`.
        training: whether dropout is active.
        return_attention_scores: also return the weights `(batch, num_heads, q_len, k_len)`.

    Returns:
        `output (batch, q_len, d_model)`, then the weights if asked, then the updated cache if
        a cache was given.

    Example:
    >>> mha = MultiHeadAttention(num_heads=8, key_dim=64)
    >>> x = keras.random.normal((2, 10, 512))
    >>> y = mha(x, x)  # self-attention, (2, 10, 512)
    >>> cache = {"key": ops.zeros((2, 8, 0, 64)), "value": ops.zeros((2, 8, 0, 64))}
    >>> y1, cache = mha(x[:, :1], x[:, :1], cache=cache)  # one step; cache (2, 8, 1, 64)
    """

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        value_dim: int | None = None,
        dropout: float = 0.0,
        use_bias: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (("num_heads", num_heads), ("key_dim", key_dim)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int. Received: {name}={value!r}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim or key_dim
        self.dropout = dropout
        self.use_bias = use_bias
        policy = self.dtype_policy
        self.query_dense = keras.layers.Dense(
            num_heads * key_dim, use_bias=use_bias, dtype=policy, name="query"
        )
        self.key_dense = keras.layers.Dense(
            num_heads * key_dim, use_bias=use_bias, dtype=policy, name="key"
        )
        self.value_dense = keras.layers.Dense(
            num_heads * self.value_dim, use_bias=use_bias, dtype=policy, name="value"
        )
        self.attention = ScaledDotProductAttention(dropout, dtype=policy, name="attention")
        self._output_dense = None  # built once d_model is known

    def build(self, query_shape, value_shape=None, key_shape=None):
        d_model = query_shape[-1]
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        self.query_dense.build(query_shape)
        self.key_dense.build(key_shape)
        self.value_dense.build(value_shape)
        self._output_dense = keras.layers.Dense(
            d_model, use_bias=self.use_bias, dtype=self.dtype_policy, name="output"
        )
        self._output_dense.build(tuple(query_shape[:-1]) + (self.num_heads * self.value_dim,))
        self.built = True

    @property
    def output_dense(self):
        return self._output_dense

    def split_heads(self, x, depth):
        """`(batch, len, h * depth)` -> `(batch, h, len, depth)`."""
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, depth))  # -> (batch, len, h, depth)
        return ops.transpose(x, (0, 2, 1, 3))  # -> (batch, h, len, depth)

    def merge_heads(self, heads):
        """`(batch, h, len, d_v)` -> `(batch, len, h * d_v)`, the Concat of the paper."""
        heads = ops.transpose(heads, (0, 2, 1, 3))  # -> (batch, len, h, d_v)
        batch, length = ops.shape(heads)[0], ops.shape(heads)[1]
        return ops.reshape(heads, (batch, length, self.num_heads * self.value_dim))

    def project_key_value(self, value, key=None):
        """Project keys and values once: `{"key": (batch, h, k_len, d_k), "value": ...}`."""
        key = value if key is None else key
        return {
            "key": self.split_heads(self.key_dense(key), self.key_dim),
            "value": self.split_heads(self.value_dense(value), self.value_dim),
        }

    def _append_to_cache(self, cache, new, cache_update_index):
        if cache_update_index is None:
            # (batch, h, cache_len, d) ++ (batch, h, q_len, d) -> (batch, h, cache_len + q_len, d)
            return {name: ops.concatenate([cache[name], new[name]], axis=2) for name in cache}
        start = [0, 0, cache_update_index, 0]
        return {name: ops.slice_update(cache[name], start, new[name]) for name in cache}

    def call(
        self,
        query,
        value=None,
        key=None,
        attention_mask=None,
        cache=None,
        cache_update_index=None,
        training=None,
        return_attention_scores=False,
    ):
        if value is None and cache is None:
            raise ValueError(
                "MultiHeadAttention needs `value` unless a precomputed `cache` is given. "
                "Received: value=None, cache=None"
            )
        q = self.split_heads(self.query_dense(query), self.key_dim)  # (batch, h, q_len, d_k)
        if value is None:  # precomputed (encoder-decoder) keys/values
            kv = cache
        elif cache is None:
            kv = self.project_key_value(value, key)
        else:
            kv = self._append_to_cache(
                cache, self.project_key_value(value, key), cache_update_index
            )
        mask = None
        if attention_mask is not None:
            mask = ops.expand_dims(ops.cast(attention_mask, "bool"), axis=1)  # (b, 1, q, k)
        heads, weights = self.attention(
            q, kv["key"], kv["value"], attention_mask=mask, training=training
        )  # heads: (batch, h, q_len, d_v)
        results = [self._output_dense(self.merge_heads(heads))]  # (batch, q_len, d_model)
        if return_attention_scores:
            results.append(weights)
        if cache is not None:
            results.append(kv)
        return results[0] if len(results) == 1 else tuple(results)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
            }
        )
        return config
