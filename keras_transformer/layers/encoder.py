"""The encoder stack (paper, section 3.1): embeddings + positional encoding, dropout, N layers."""

from __future__ import annotations

import keras

from keras_transformer.layers.encoder_layer import EncoderLayer, check_norm_position
from keras_transformer.layers.learned_positional_encoding import LearnedPositionalEncoding
from keras_transformer.layers.positional_encoding import PositionalEncoding

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")


def make_positional_encoding(kind: str, max_length: int, dtype) -> keras.layers.Layer:
    if kind == "sinusoidal":
        return PositionalEncoding(dtype=dtype, name="positional_encoding")
    if kind == "learned":
        return LearnedPositionalEncoding(max_length, dtype=dtype, name="positional_encoding")
    raise ValueError(
        f"positional_encoding must be one of {POSITIONAL_ENCODINGS}. Received: {kind!r}"
    )


@keras.saving.register_keras_serializable(package="keras_transformer")
class Encoder(keras.layers.Layer):
    """N encoder layers over (scaled) source embeddings.

    Args:
        num_layers: N.
        num_heads, d_ff, key_dim, value_dim, dropout, attention_dropout, norm_position,
            layer_norm_epsilon: as in `EncoderLayer`. `dropout` also applies to the sum of
            embeddings and positional encodings.
        positional_encoding: "sinusoidal" or "learned".
        max_length: positions of the learned table (unused by "sinusoidal").

    Call arguments:
        inputs: source embeddings `(batch, src_len, d_model)`, already scaled by sqrt(d_model).
        padding_mask: boolean `(batch, src_len)`, True for real tokens.
        training: whether dropout is active.
        return_attention_scores: also return a list of N self-attention weight tensors
            `(batch, num_heads, src_len, src_len)`.

    Returns:
        The memory `(batch, src_len, d_model)` (and the weights if asked). With
        norm_position="pre", a final LayerNorm is applied.

    Example:
    >>> encoder = Encoder(num_layers=6, num_heads=8, d_ff=2048)
    >>> memory = encoder(keras.random.normal((2, 10, 512)))
    """

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
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.norm_position = check_norm_position(norm_position)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.positional_encoding = positional_encoding
        self.max_length = max_length
        self.position_layer = make_positional_encoding(
            positional_encoding, max_length, self.dtype_policy
        )
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.layers = [self._make_layer(f"layer_{i}") for i in range(num_layers)]
        self.final_norm = None
        if norm_position == "pre":
            self.final_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="final_norm"
            )

    def _layer_kwargs(self):
        return dict(
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            key_dim=self.key_dim,
            value_dim=self.value_dim,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            norm_position=self.norm_position,
            layer_norm_epsilon=self.layer_norm_epsilon,
        )

    def _make_layer(self, name):
        return EncoderLayer(name=name, dtype=self.dtype_policy, **self._layer_kwargs())

    def build(self, input_shape):
        self.position_layer.build(input_shape)
        for layer in self.layers:
            layer.build(input_shape)
        if self.final_norm is not None:
            self.final_norm.build(input_shape)
        self.built = True

    def embed_positions(self, inputs, start_index=0, training=None):
        """Dropout(embeddings + PE(start_index + t)): `(batch, len, d_model)`."""
        x = inputs + self.position_layer(inputs, start_index=start_index)
        return self.embedding_dropout(x, training=training)

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores=False):
        x = self.embed_positions(inputs, training=training)
        all_weights = []
        for layer in self.layers:
            x, weights = layer(
                x, padding_mask=padding_mask, training=training, return_attention_scores=True
            )
            all_weights.append(weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, all_weights) if return_attention_scores else x

    def get_config(self):
        config = super().get_config()
        config.update({"num_layers": self.num_layers, **self._layer_kwargs()})
        config.update(
            {"positional_encoding": self.positional_encoding, "max_length": self.max_length}
        )
        return config
