"""Keras layers of the Transformer, one public layer per module."""

from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.encoder import Encoder
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.learned_positional_encoding import LearnedPositionalEncoding
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.layers.positionwise_feed_forward import PositionwiseFeedForward
from keras_transformer.layers.scaled_dot_product_attention import ScaledDotProductAttention
from keras_transformer.layers.shared_embedding import SharedEmbedding

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "LearnedPositionalEncoding",
    "MultiHeadAttention",
    "PositionalEncoding",
    "PositionwiseFeedForward",
    "ScaledDotProductAttention",
    "SharedEmbedding",
]
