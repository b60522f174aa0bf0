"""What encoder and decoder share, as two private base classes (not public layers):

- `SublayerBlock`: the arguments, config and residual wrapping of one encoder or decoder
  layer, `LayerNorm(x + Dropout(Sublayer(x)))` (paper, section 5.4; "post") or
  `x + Dropout(Sublayer(LayerNorm(x)))` ("pre"), and the feed-forward sub-layer both end with.
- `LayerStack`: the arguments, config, positional encoding, embedding dropout and optional final
  LayerNorm of the encoder and decoder stacks.

`EncoderLayer`/`DecoderLayer` and `Encoder`/`Decoder` are siblings built on these.
"""

from __future__ import annotations

import keras

from keras_transformer.checks import check_choice
from keras_transformer.constants import NORM_POSITIONS, POSITIONAL_ENCODINGS
from keras_transformer.layers.learned_positional_encoding import LearnedPositionalEncoding
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.layers.positionwise_feed_forward import PositionwiseFeedForward


class SublayerBlock(keras.layers.Layer):
    """Base of `EncoderLayer` and `DecoderLayer`: see `EncoderLayer` for the arguments."""

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
        self.norm_position = check_choice("norm_position", norm_position, NORM_POSITIONS)
        self.layer_norm_epsilon = layer_norm_epsilon

    def _attention(self, name, input_shape):
        key_dim = self.key_dim or input_shape[-1] // self.num_heads
        return MultiHeadAttention(
            self.num_heads, key_dim, self.value_dim, self.attention_dropout,
            dtype=self.dtype_policy, name=name,
        )  # fmt: skip

    def _layer_norm(self, name, input_shape):
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        norm.build(input_shape)
        return norm

    def _build_feed_forward(self, input_shape):
        self.feed_forward = PositionwiseFeedForward(
            self.d_ff, dtype=self.dtype_policy, name="feed_forward"
        )
        self.feed_forward.build(input_shape)
        self.feed_forward_norm = self._layer_norm("feed_forward_norm", input_shape)
        self.residual_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def residual(self, x, sublayer, norm, training):
        """LayerNorm(x + Dropout(Sublayer(x))), or x + Dropout(Sublayer(LayerNorm(x))).

        `sublayer` returns a tuple whose first item is the output; the rest is passed back."""
        if self.norm_position == "post":
            out = sublayer(x)
            return norm(x + self.residual_dropout(out[0], training=training)), out[1:]
        out = sublayer(norm(x))
        return x + self.residual_dropout(out[0], training=training), out[1:]

    def feed_forward_block(self, x, training=None):
        """The last sub-layer of every encoder and decoder layer: `(batch, len, d_model)`."""
        feed_forward = lambda h: (self.feed_forward(h, training=training),)  # noqa: E731
        return self.residual(x, feed_forward, self.feed_forward_norm, training)[0]

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


def make_positional_encoding(kind: str, max_length: int, dtype) -> keras.layers.Layer:
    check_choice("positional_encoding", kind, POSITIONAL_ENCODINGS)
    if kind == "learned":
        return LearnedPositionalEncoding(max_length, dtype=dtype, name="positional_encoding")
    return PositionalEncoding(dtype=dtype, name="positional_encoding")


class LayerStack(keras.layers.Layer):
    """Base of `Encoder` and `Decoder`: see `Encoder` for the arguments.

    Subclasses set `layer_class` (the per-layer class, built `num_layers` times)."""

    layer_class: type[SublayerBlock]

    def __init__(
        self,
        num_layers: int,
        num_heads: int,
        d_ff: int,
        key_dim: int | None = None,
        value_dim: int | None = None,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        norm_position: str = "post",
        layer_norm_epsilon: float = 1e-6,
        positional_encoding: str = "sinusoidal",
        max_length: int = 256,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be a positive int. Received: {num_layers!r}")
        self.num_layers = num_layers
        self.layer_kwargs = dict(
            num_heads=num_heads,
            d_ff=d_ff,
            key_dim=key_dim,
            value_dim=value_dim,
            dropout=dropout,
            attention_dropout=attention_dropout,
            norm_position=check_choice("norm_position", norm_position, NORM_POSITIONS),
            layer_norm_epsilon=layer_norm_epsilon,
        )
        self.positional_encoding = positional_encoding
        self.max_length = max_length
        self.position_layer = make_positional_encoding(
            positional_encoding, max_length, self.dtype_policy
        )
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.layers = [
            self.layer_class(name=f"layer_{i}", dtype=self.dtype_policy, **self.layer_kwargs)
            for i in range(num_layers)
        ]
        self.final_norm = None
        if norm_position == "pre":
            self.final_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="final_norm"
            )

    def _build_stack(self, input_shape, *layer_shapes):
        self.position_layer.build(input_shape)
        for layer in self.layers:
            layer.build(input_shape, *layer_shapes)
        if self.final_norm is not None:
            self.final_norm.build(input_shape)
        self.built = True

    def embed_positions(self, inputs, start_index=0, training=None):
        """Dropout(embeddings + PE(start_index + t)): `(batch, len, d_model)`."""
        x = inputs + self.position_layer(inputs, start_index=start_index)
        return self.embedding_dropout(x, training=training)

    def apply_final_norm(self, x):
        """The stack's last LayerNorm ("pre" only; "post" layers end normalized)."""
        return x if self.final_norm is None else self.final_norm(x)

    def get_config(self):
        config = super().get_config()
        config.update({"num_layers": self.num_layers, **self.layer_kwargs})
        config.update(
            {"positional_encoding": self.positional_encoding, "max_length": self.max_length}
        )
        return config
