"""The decoder stack (paper, section 3.1): target embeddings + positional encoding, dropout,
N layers with causal self-attention, and a key/value cache for step-by-step decoding."""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.layers.base import LayerStack
from keras_transformer.layers.decoder_layer import DecoderLayer


def causal_mask(query_length, key_length, start_index=0):
    """Boolean `(query_length, key_length)`: query i (at position start_index + i) sees keys
    j <= start_index + i."""
    rows = ops.expand_dims(ops.arange(query_length) + start_index, 1)  # (q_len, 1)
    cols = ops.expand_dims(ops.arange(key_length), 0)  # (1, k_len)
    return ops.greater_equal(rows, cols)  # -> (q_len, k_len)


@keras.saving.register_keras_serializable(package="keras_transformer")
class Decoder(LayerStack):
    """N decoder layers over (scaled) target embeddings, attending to the encoder memory.

    Takes the same arguments as `Encoder` (both build on `layers.base.LayerStack`).

    Call arguments:
        inputs: target embeddings `(batch, tgt_len, d_model)`, already scaled by sqrt(d_model);
            the target shifted right (starting with BOS).
        memory: encoder output `(batch, src_len, d_model)` (None when `cache` is given).
        memory_mask: boolean `(batch, src_len)`, True for real source tokens.
        target_mask: boolean `(batch, tgt_len)`, True for real target tokens (optional).
        cache: list of N per-layer caches from `init_cache`. Decoding then starts at position
            `cache_update_index` (fixed-size cache) or at the current cache length (growing).
        cache_update_index: see `cache`.
        training: whether dropout is active.
        return_attention_scores: also return a list of N cross-attention weight tensors
            `(batch, num_heads, tgt_len, src_len)`.

    Returns:
        `(batch, tgt_len, d_model)`, then the weights if asked, then the new cache if given.

    Example:
    >>> decoder = Decoder(num_layers=6, num_heads=8, d_ff=2048)
    >>> y = decoder(keras.random.normal((2, 7, 512)), keras.random.normal((2, 10, 512)))
    """

    layer_class = DecoderLayer

    def build(self, inputs_shape, memory_shape=None):
        self._build_stack(inputs_shape, inputs_shape if memory_shape is None else memory_shape)

    def init_cache(self, memory, max_length=None):
        """Per-layer caches; encoder-decoder keys/values are projected here, once."""
        return [layer.init_cache(memory, max_length=max_length) for layer in self.layers]

    def _start_index(self, cache, cache_update_index):
        if cache is None:
            return 0
        if cache_update_index is not None:
            return cache_update_index
        return ops.shape(cache[0]["self"]["key"])[2]  # tokens already decoded

    def _self_attention_mask(self, inputs, target_mask, cache, cache_update_index, start):
        """Causal (and, with `target_mask`, padding) mask `(1 or batch, q_len, k_len)`."""
        q_len = ops.shape(inputs)[1]
        k_len = q_len
        if cache is not None:
            cache_len = ops.shape(cache[0]["self"]["key"])[2]
            k_len = cache_len if cache_update_index is not None else cache_len + q_len
        mask = ops.expand_dims(causal_mask(q_len, k_len, start), 0)  # (1, q_len, k_len)
        if target_mask is not None:
            keys_real = ops.expand_dims(ops.cast(target_mask, "bool"), 1)  # (b, 1, tgt_len)
            mask = ops.logical_and(mask, keys_real)  # (b, q_len, k_len)
        return mask

    def call(
        self,
        inputs,
        memory=None,
        memory_mask=None,
        target_mask=None,
        cache=None,
        cache_update_index=None,
        training=None,
        return_attention_scores=False,
    ):
        start = self._start_index(cache, cache_update_index)
        mask = self._self_attention_mask(inputs, target_mask, cache, cache_update_index, start)
        x = self.embed_positions(inputs, start_index=start, training=training)
        all_weights, new_cache = [], []
        for i, layer in enumerate(self.layers):
            out = layer(
                x, memory, self_attention_mask=mask, memory_mask=memory_mask,
                cache=None if cache is None else cache[i],
                cache_update_index=cache_update_index, training=training,
                return_attention_scores=True,
            )  # fmt: skip
            x, weights = out[0], out[1]
            all_weights.append(weights)
            if cache is not None:
                new_cache.append(out[2])
        results = [self.apply_final_norm(x)]
        if return_attention_scores:
            results.append(all_weights)
        if cache is not None:
            results.append(new_cache)
        return results[0] if len(results) == 1 else tuple(results)
