"""Sinusoidal positional encoding (paper, section 3.5):

PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEncoding(keras.layers.Layer):
    """Fixed sinusoidal position encodings, from any start position (for cached decoding).

    Args:
        max_wavelength: the 10000 of the formula.

    Call arguments:
        inputs: `(batch, seq_len, d_model)` embeddings; only their shape and dtype are used.
        start_index: position of the first element (int or scalar tensor), default 0. Cached
            decoding passes the current step so a single token gets PE(step).

    Returns:
        The encodings `PE(start_index + t)` broadcast to `(batch, seq_len, d_model)`. The caller
        adds them to the embeddings.

    Example:
    >>> pe = PositionalEncoding()
    >>> x = keras.ops.zeros((2, 10, 512))
    >>> y = x + pe(x)
    """

    def __init__(self, max_wavelength: float = 10000.0, **kwargs):
        super().__init__(**kwargs)
        if max_wavelength <= 0:
            raise ValueError(f"max_wavelength must be > 0. Received: {max_wavelength}")
        self.max_wavelength = max_wavelength

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        seq_len, d_model = shape[-2], shape[-1]
        positions = ops.cast(ops.arange(seq_len), "float32") + ops.cast(start_index, "float32")
        dims = ops.cast(ops.arange(d_model), "float32")
        two_i = dims - ops.mod(dims, 2.0)  # 2i for both the sin (2i) and the cos (2i+1) column
        inv_freq = ops.power(float(self.max_wavelength), -two_i / ops.cast(d_model, "float32"))
        angles = ops.expand_dims(positions, -1) * ops.expand_dims(inv_freq, 0)  # (seq, d_model)
        is_even = ops.equal(ops.mod(ops.arange(d_model), 2), 0)
        encoding = ops.where(is_even, ops.sin(angles), ops.cos(angles))  # (seq_len, d_model)
        return ops.broadcast_to(ops.cast(encoding, self.compute_dtype), shape)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config
