"""One decoder layer (paper, section 3.1): masked self-attention, encoder-decoder attention and
the feed-forward network, each wrapped with residual + dropout + LayerNorm."""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.layers.base import SublayerBlock


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderLayer(SublayerBlock):
    """Masked self-attention + encoder-decoder attention + FFN, with a key/value cache.

    Takes the same arguments as `EncoderLayer` (both build on `layers.base.SublayerBlock`).

    Call arguments:
        inputs: `(batch, tgt_len, d_model)`.
        memory: encoder output `(batch, src_len, d_model)`; may be None when `cache` holds the
            projected encoder-decoder keys/values.
        self_attention_mask: boolean `(batch, tgt_len, k_len)`, True = may attend (causal and
            padding; built by `Decoder`).
        memory_mask: boolean `(batch, src_len)`, True for real source tokens.
        cache: optional `{"self": {"key", "value"}, "cross": {"key", "value"}}` of
            `(batch, num_heads, len, d_k)` tensors (`init_cache`), see `MultiHeadAttention`.
        cache_update_index: write position for a fixed-size self-attention cache.
        training: whether dropout is active.
        return_attention_scores: also return the cross-attention weights
            `(batch, num_heads, tgt_len, src_len)`.

    Returns:
        `(batch, tgt_len, d_model)`, then the cross-attention weights if asked, then the updated
        cache if one was given.

    Example:
    >>> layer = DecoderLayer(num_heads=8, d_ff=2048)
    >>> y = layer(keras.random.normal((2, 7, 512)), keras.random.normal((2, 10, 512)))
    """

    def build(self, inputs_shape, memory_shape=None):
        memory_shape = inputs_shape if memory_shape is None else memory_shape
        self.self_attention = self._attention("self_attention", inputs_shape)
        self.self_attention.build(inputs_shape, inputs_shape)
        self.attention_norm = self._layer_norm("attention_norm", inputs_shape)
        self._build_feed_forward(inputs_shape)
        self.cross_attention = self._attention("cross_attention", inputs_shape)
        self.cross_attention.build(inputs_shape, memory_shape)
        self.cross_attention_norm = self._layer_norm("cross_attention_norm", inputs_shape)
        self.built = True

    def call(
        self,
        inputs,
        memory=None,
        self_attention_mask=None,
        memory_mask=None,
        cache=None,
        cache_update_index=None,
        training=None,
        return_attention_scores=False,
    ):
        cross_mask = None
        if memory_mask is not None:
            cross_mask = ops.expand_dims(ops.cast(memory_mask, "bool"), 1)  # (b, 1, src_len)
        self_cache = None if cache is None else cache["self"]
        cross_cache = None if cache is None else cache["cross"]

        def self_attend(x):  # -> (output,) or (output, new self-attention cache)
            out = self.self_attention(
                x, x, attention_mask=self_attention_mask, cache=self_cache,
                cache_update_index=cache_update_index, training=training,
            )  # fmt: skip
            return (out,) if self_cache is None else out

        def cross_attend(x):
            return self.cross_attention(
                x, memory if cross_cache is None else None, attention_mask=cross_mask,
                cache=cross_cache, training=training, return_attention_scores=True,
            )  # fmt: skip

        x, new_self = self.residual(inputs, self_attend, self.attention_norm, training)
        x, (weights, *_) = self.residual(x, cross_attend, self.cross_attention_norm, training)
        results = [self.feed_forward_block(x, training)]
        if return_attention_scores:
            results.append(weights)
        if cache is not None:
            results.append({"self": new_self[0], "cross": cross_cache})
        return results[0] if len(results) == 1 else tuple(results)

    def init_cache(self, memory, batch_size=None, max_length=None):
        """Cache for step-by-step decoding: encoder-decoder keys/values projected once.

        The self-attention cache starts empty `(batch, h, 0, d_k)` and grows per step, or, with
        `max_length`, is a zero buffer `(batch, h, max_length, d_k)` written at each step.
        """
        batch = ops.shape(memory)[0] if batch_size is None else batch_size
        attn = self.self_attention
        length = 0 if max_length is None else max_length
        zeros_k = ops.zeros((batch, attn.num_heads, length, attn.key_dim), self.compute_dtype)
        zeros_v = ops.zeros((batch, attn.num_heads, length, attn.value_dim), self.compute_dtype)
        return {
            "self": {"key": zeros_k, "value": zeros_v},
            "cross": self.cross_attention.project_key_value(memory),
        }
