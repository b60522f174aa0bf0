"""keras-transformer: the Transformer of "Attention Is All You Need" in Keras 3.

Layers and model use keras.ops only and run on every Keras backend; the data pipeline,
training loop, beam search and export use TensorFlow.

`import keras_transformer` loads only the plain-Python configuration; Keras (and with it the
backend) is imported on first use of `Transformer`, `build_transformer` or `layers`, so the
command-line tools start fast and quiet. Import `keras_transformer.model` (or touch
`keras_transformer.Transformer`) before `keras.saving.load_model` of a `.keras` file: that
registers the serializable classes.
"""

from keras_transformer.config import (
    DocumentOptions,
    SearchOptions,
    TrainingConfig,
    TransformerConfig,
)

__version__ = "0.1.0"

__all__ = [
    "DocumentOptions",
    "SearchOptions",
    "TrainingConfig",
    "Transformer",
    "TransformerConfig",
    "build_transformer",
    "layers",
]


def __getattr__(name: str):
    if name in ("Transformer", "build_transformer"):
        from keras_transformer import model

        return getattr(model, name)
    if name == "layers":
        import keras_transformer.layers as layers

        return layers
    raise AttributeError(f"module 'keras_transformer' has no attribute {name!r}")
