"""The encoder stack (paper, section 3.1): embeddings + positional encoding, dropout, N layers."""

from __future__ import annotations

import keras

from keras_transformer.layers.base import LayerStack
from keras_transformer.layers.encoder_layer import EncoderLayer


@keras.saving.register_keras_serializable(package="keras_transformer")
class Encoder(LayerStack):
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

    layer_class = EncoderLayer

    def build(self, input_shape):
        self._build_stack(input_shape)

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores=False):
        x = self.embed_positions(inputs, training=training)
        all_weights = []
        for layer in self.layers:
            x, weights = layer(
                x, padding_mask=padding_mask, training=training, return_attention_scores=True
            )
            all_weights.append(weights)
        x = self.apply_final_norm(x)
        return (x, all_weights) if return_attention_scores else x
