"""MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,
head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)  (paper, section 3.2.2)."""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.layers import padded_dense, slot_cache
from keras_transformer.layers.scaled_dot_product_attention import ScaledDotProductAttention

SWAP_BY_GATHER = True  # A/B switch of benchmarks/run.py decode ab ("slots:transpose")


def swap_blocks(x, outer, inner):
    """`(n, outer * inner, d)` in (outer, inner) order -> the same in (inner, outer) order.

    A gather over the middle axis: on the small tensors of a decoding step it costs about a
    fifth of the oneDNN transpose (a ~20 us floor per call on our CPUs) that
    `transpose(reshape(x, (n, outer, inner, d)), (0, 2, 1, 3))` would run."""
    if not SWAP_BY_GATHER:
        n, d = ops.shape(x)[0], ops.shape(x)[-1]
        x = ops.transpose(ops.reshape(x, (n, outer, inner, d)), (0, 2, 1, 3))
        return ops.reshape(x, (n, outer * inner, d))
    target = ops.arange(outer * inner)
    source = (target % outer) * inner + target // outer  # (outer, inner) index of each
    return ops.take(x, source, axis=1)


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
        value: `(batch, k_len, d_model)`; None only with a precomputed (static) `cache`.
        key: `(batch, k_len, d_model)`, default `value`.
        attention_mask: boolean, broadcastable to `(batch, q_len, k_len)`; True = may attend.
        cache: optional dict `{"key": (batch, num_heads, cache_len, d_k),
            "value": (batch, num_heads, cache_len, d_v)}`.
            - With `value=None`, the cache holds precomputed keys/values (encoder-decoder
              attention: projected once with `project_key_value`) and is returned unchanged.
            - With `value` given (self-attention), the new keys/values of `value` are appended:
              concatenated (the cache grows per step) when `cache_update_index` is None, or
              written into a fixed-size cache at `cache_update_index` (static shapes, for XLA).
            - A cache with fewer rows than `query` holds keys/values per item, shared by
              the `rows // items` consecutive query rows of each item (a beam): the queries
              attend to them grouped, and nothing is tiled by beam. A static one is
              `(items, h, S, d_k)`; a self-attention one (one query token per row) is
              a `slot_cache` (its keys/values `(items, h, positions, beam, d)` in two parts,
              and "ancestors", bool `(items, beam, (t + 1) * beam)`): position s of beam q
              lives in the slot of its ancestor, so re-ranking beams changes the mask only,
              never the keys/values (`decoding.incremental`). The new keys/values go to
              position t in every row's own slot; `attention_mask` is then unused and no
              weights are returned (None).
        cache_update_index: int or scalar tensor, see `cache`.
        training: whether dropout is active.
        return_attention_scores: also return the weights `(batch, num_heads, q_len, k_len)`.
        kernels: None, or `kernels()`: some of the four projections' weights padded once
            per search (`layers.padded_dense`); the same result, a faster product on some
            CPUs.

    Returns:
        `output (batch, q_len, d_model)`, then the weights if asked (`(batch, h, q_len, k_len)`;
        None with a `slot_cache`), then the updated cache if a cache was given.

    Example:
    >>> mha = MultiHeadAttention(num_heads=8, key_dim=64)
    >>> x = keras.random.normal((2, 10, 512))
    >>> y = mha(x, x)  # self-attention, (2, 10, 512)
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

    def _dense(self, name, x, kernels=None):
        """The `name` projection ("query", "key", "value" or "output") of `x`, with its
        padded weights when `kernels` has them."""
        layer = self._output_dense if name == "output" else getattr(self, f"{name}_dense")
        return padded_dense.apply(layer, x, (kernels or {}).get(name))

    def kernels(self, names=("query", "key", "value", "output"), pad=padded_dense.PAD) -> dict:
        """`{name: padded_dense.padded_kernel(...)}` of the named projections, for
        `call(..., kernels=)` (computed once per search, outside its loop)."""
        layers = {"query": self.query_dense, "key": self.key_dense, "value": self.value_dense,
                  "output": self._output_dense}  # fmt: skip
        return {name: padded_dense.padded_kernel(layers[name], pad) for name in names}

    def _split_heads(self, x, depth):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, depth))  # -> (batch, len, h, depth)
        return ops.transpose(x, (0, 2, 1, 3))  # -> (batch, h, len, depth)

    def project_key_value(self, value, key=None, kernels=None):
        """Project keys and values once: `{"key": (batch, h, k_len, d_k), "value": ...}`."""
        key = value if key is None else key
        return {
            "key": self._split_heads(self._dense("key", key, kernels), self.key_dim),
            "value": self._split_heads(self._dense("value", value, kernels), self.value_dim),
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
        kernels=None,
    ):
        if value is None and cache is None:
            raise ValueError("MultiHeadAttention needs `value` unless a static `cache` is given.")
        if cache is not None and value is None:  # precomputed (encoder-decoder) keys/values
            concat, weights = self._attend_per_item(
                self._dense("query", query, kernels), cache, attention_mask, training,
                return_attention_scores,
            )  # fmt: skip
            return self._results(concat, weights, return_attention_scores, cache, kernels)
        if cache is not None and "ancestors" in cache:
            key = value if key is None else key
            concat, new_cache = self._attend_slots(query, key, value, cache, kernels)
            return self._results(concat, None, return_attention_scores, new_cache, kernels)
        q = self._split_heads(self._dense("query", query, kernels), self.key_dim)  # (b, h, q, d_k)
        if cache is None:
            kv = self.project_key_value(value, key, kernels)
        else:
            kv = self._append_to_cache(
                cache, self.project_key_value(value, key, kernels), cache_update_index
            )
        mask = None
        if attention_mask is not None:
            mask = ops.expand_dims(ops.cast(attention_mask, "bool"), axis=1)  # (b, 1, q, k)
        heads, weights = self.attention(
            q, kv["key"], kv["value"], attention_mask=mask, training=training
        )
        heads = ops.transpose(heads, (0, 2, 1, 3))  # (batch, h, q_len, d_v) -> (b, q_len, h, d_v)
        batch, q_len = ops.shape(heads)[0], ops.shape(heads)[1]
        concat = ops.reshape(heads, (batch, q_len, self.num_heads * self.value_dim))
        new_cache = None if cache is None else kv
        return self._results(concat, weights, return_attention_scores, new_cache, kernels)

    def _results(self, concat, weights, return_attention_scores, cache, kernels=None):
        """`output = concat W_O`, then the weights if asked, then `cache` unless None."""
        results = [self._dense("output", concat, kernels)]  # (batch, q_len, d_model)
        if return_attention_scores:
            results.append(weights)
        if cache is not None:
            results.append(cache)
        return results[0] if len(results) == 1 else tuple(results)

    def _group(self, query, items):
        """Projected queries `(rows, q_len, h * d_k)`, rows = items * g (g consecutive rows
        per item) -> `(items, h, g * q_len, d_k)`: one matrix per item and head."""
        rows, q_len = ops.shape(query)[0], ops.shape(query)[1]
        per_head = (rows // items) * q_len  # g * q_len queries per item and head
        q = ops.reshape(query, (items, per_head * self.num_heads, self.key_dim))  # (g, L, h)
        q = swap_blocks(q, per_head, self.num_heads)  # -> (items, h * g * q_len, d_k)
        return ops.reshape(q, (items, self.num_heads, per_head, self.key_dim))

    def _ungroup(self, heads, rows, q_len):
        """`(items, h, g * q_len, d_v)` -> `(rows, q_len, h * d_v)`, the inverse of `_group`."""
        items, per_head = ops.shape(heads)[0], ops.shape(heads)[2]  # g * q_len
        heads = ops.reshape(heads, (items, self.num_heads * per_head, self.value_dim))
        heads = swap_blocks(heads, self.num_heads, per_head)  # -> (items, g * q_len * h, d_v)
        return ops.reshape(heads, (rows, q_len, self.num_heads * self.value_dim))

    def _attend_per_item(self, query, kv, attention_mask, training, weights_wanted):
        """Projected queries `(rows, q_len, h * d_k)` on per-item keys/values `(items, h,
        k_len, d)`, rows = items * g (g = 1 for a cache with a row per query): one product
        per item and head for its g queries, no tiling by beam. `attention_mask` is boolean,
        broadcastable to `(items, g * q_len, k_len)`.

        Returns `(concat (rows, q_len, h * d_v), weights (rows, h, q_len, k_len) or None)`."""
        rows, q_len = ops.shape(query)[0], ops.shape(query)[1]
        items = ops.shape(kv["key"])[0]
        mask = None
        if attention_mask is not None:
            mask = ops.expand_dims(ops.cast(attention_mask, "bool"), axis=1)  # (items, 1, ., k)
        heads, weights = self.attention(
            self._group(query, items),
            kv["key"],
            kv["value"],
            attention_mask=mask,
            training=training,
        )  # heads: (items, h, g * q_len, d_v)
        concat = self._ungroup(heads, rows, q_len)
        if not weights_wanted:
            return concat, None
        weights = ops.reshape(weights, (items, self.num_heads, -1, q_len, ops.shape(weights)[-1]))
        weights = ops.transpose(weights, (0, 2, 1, 3, 4))  # -> (items, g, h, q_len, k_len)
        return concat, ops.reshape(weights, (rows, self.num_heads, q_len, -1))

    def _attend_slots(self, query, key, value, cache, kernels=None):
        """Self-attention of one new token per row `(items * beam, 1, d_model)` on a
        `slot_cache`: `(concat (rows, 1, h * d_v), the cache with the new keys/values)`."""
        items, beam = ops.shape(cache["key"])[0], ops.shape(cache["ancestors"])[1]

        def per_item(x, depth):  # (items * beam, 1, h * depth) -> (items, h, 1, beam, depth)
            x = ops.reshape(x, (items, beam * self.num_heads, depth))  # (beam, h) order
            x = swap_blocks(x, beam, self.num_heads)  # -> (h, beam) order
            return ops.reshape(x, (items, self.num_heads, 1, beam, depth))

        new_key = per_item(self._dense("key", key, kernels), self.key_dim)
        new_value = per_item(self._dense("value", value, kernels), self.value_dim)
        new_cache = slot_cache.append(cache, new_key, new_value)
        q = self._group(self._dense("query", query, kernels), items)  # (items, h, beam, d_k)
        heads = slot_cache.attend(q, new_cache, cache["ancestors"])  # (items, h, beam, d_v)
        return self._ungroup(heads, ops.shape(query)[0], 1), new_cache

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
