"""One encoder layer (paper, section 3.1): self-attention, then the feed-forward network, each
wrapped as LayerNorm(x + Dropout(Sublayer(x))) ("post") or x + Dropout(Sublayer(LayerNorm(x)))
("pre")."""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.layers.base import SublayerBlock


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderLayer(SublayerBlock):
    """Self-attention + position-wise FFN with residuals, dropout and layer normalization.

    Args:
        num_heads: h.
        d_ff: inner width of the feed-forward network.
        key_dim: d_k per head; default d_model // num_heads.
        value_dim: d_v per head; default key_dim.
        dropout: P_drop on each sub-layer output before the residual sum.
        attention_dropout: dropout on attention weights.
        norm_position: "post" (paper) or "pre".
        layer_norm_epsilon: LayerNormalization epsilon.

    Call arguments:
        inputs: `(batch, src_len, d_model)`.
        padding_mask: boolean `(batch, src_len)`, True for real tokens.
        training: whether dropout is active.
        return_attention_scores: also return the weights `(batch, num_heads, src_len, src_len)`.

    Returns:
        `(batch, src_len, d_model)` (and the attention weights if asked).

    Example:
    >>> layer = EncoderLayer(num_heads=8, d_ff=2048)
    >>> y = layer(keras.random.normal((2, 10, 512)))
    """

    def build(self, input_shape):
        self.self_attention = self._attention("self_attention", input_shape)
        self.self_attention.build(input_shape, input_shape)
        self.attention_norm = self._layer_norm("attention_norm", input_shape)
        self._build_feed_forward(input_shape)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores=False):
        attention_mask = None
        if padding_mask is not None:
            attention_mask = ops.expand_dims(ops.cast(padding_mask, "bool"), 1)  # (b, 1, src)

        def attend(x):
            return self.self_attention(
                x, x, attention_mask=attention_mask, training=training,
                return_attention_scores=True,
            )  # fmt: skip

        x, (weights,) = self.residual(inputs, attend, self.attention_norm, training)
        x = self.feed_forward_block(x, training)
        return (x, weights) if return_attention_scores else x
