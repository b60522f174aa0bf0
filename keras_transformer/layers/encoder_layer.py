"""One encoder layer (paper, section 3.1): self-attention, then the feed-forward network, each
wrapped as LayerNorm(x + Dropout(Sublayer(x))) ("post") or x + Dropout(Sublayer(LayerNorm(x)))
("pre")."""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.positionwise_feed_forward import PositionwiseFeedForward

NORM_POSITIONS = ("post", "pre")


def check_norm_position(norm_position: str) -> str:
    if norm_position not in NORM_POSITIONS:
        raise ValueError(
            f"norm_position must be one of {NORM_POSITIONS}. Received: {norm_position!r}"
        )
    return norm_position


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderLayer(keras.layers.Layer):
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

    def __init__(
        self,
        num_heads: int,
        d_ff: int,
        key_dim: int | None = None,
        value_dim: int | None = None,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        norm_position: str = "post",
        layer_norm_epsilon: float = 1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.norm_position = check_norm_position(norm_position)
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, input_shape):
        d_model = input_shape[-1]
        key_dim = self.key_dim or d_model // self.num_heads
        policy = self.dtype_policy
        self.self_attention = MultiHeadAttention(
            self.num_heads, key_dim, self.value_dim, self.attention_dropout,
            dtype=policy, name="self_attention",
        )  # fmt: skip
        self.self_attention.build(input_shape, input_shape)
        self.feed_forward = PositionwiseFeedForward(self.d_ff, dtype=policy, name="feed_forward")
        self.feed_forward.build(input_shape)
        self.attention_norm = self._layer_norm("attention_norm", input_shape)
        self.feed_forward_norm = self._layer_norm("feed_forward_norm", input_shape)
        self.residual_dropout = keras.layers.Dropout(self.dropout, dtype=policy)
        self.built = True

    def _layer_norm(self, name, input_shape):
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        norm.build(input_shape)
        return norm

    def _residual(self, x, sublayer, norm, training):
        """LayerNorm(x + Dropout(Sublayer(x))), or x + Dropout(Sublayer(LayerNorm(x)))."""
        if self.norm_position == "post":
            out = sublayer(x)
            return norm(x + self.residual_dropout(out[0], training=training)), out[1:]
        out = sublayer(norm(x))
        return x + self.residual_dropout(out[0], training=training), out[1:]

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores=False):
        attention_mask = None
        if padding_mask is not None:
            attention_mask = ops.expand_dims(ops.cast(padding_mask, "bool"), 1)  # (b, 1, src)

        def attend(x):
            return self.self_attention(
                x, x, attention_mask=attention_mask, training=training,
                return_attention_scores=True,
            )  # fmt: skip

        x, (weights,) = self._residual(inputs, attend, self.attention_norm, training)
        x, _ = self._residual(
            x, lambda h: (self.feed_forward(h, training=training),), self.feed_forward_norm,
            training,
        )  # fmt: skip
        return (x, weights) if return_attention_scores else x

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "norm_position": self.norm_position,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
