"""keras-transformer: the Transformer of "Attention Is All You Need" in Keras 3.

Layers and model use keras.ops only and run on every Keras backend; the data pipeline,
training loop, beam search and export use TensorFlow.
"""

from keras_transformer import layers
from keras_transformer.config import SearchOptions, TransformerConfig
from keras_transformer.model import Transformer, build_transformer

__version__ = "0.1.0"

__all__ = [
    "SearchOptions",
    "Transformer",
    "TransformerConfig",
    "build_transformer",
    "layers",
]
