"""Learned positional embeddings (paper, Table 3 row E: "positional embedding instead of
sinusoids")."""

from __future__ import annotations

import keras
from keras import ops
from keras.src.backend.common.symbolic_scope import in_symbolic_scope  # no public API


@keras.saving.register_keras_serializable(package="keras_transformer")
class LearnedPositionalEncoding(keras.layers.Layer):
    """A trainable `(max_length, d_model)` table of position vectors.

    Args:
        max_length: number of positions the table holds.
        initializer: initializer of the table.

    Call arguments:
        inputs: `(batch, seq_len, d_model)` embeddings; only their shape is used.
        start_index: position of the first element (int or scalar tensor), default 0.

    Returns:
        Rows `start_index .. start_index + seq_len - 1` broadcast to `(batch, seq_len, d_model)`.

    Example:
    >>> pe = LearnedPositionalEncoding(max_length=256)
    >>> x = keras.ops.zeros((2, 10, 512))
    >>> y = x + pe(x)
    """

    def __init__(self, max_length: int, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(max_length, int) or max_length <= 0:
            raise ValueError(f"max_length must be a positive int. Received: {max_length!r}")
        self.max_length = max_length
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_length, input_shape[-1]),
            initializer=self.initializer,
        )
        self.built = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        length = inputs.shape[-2]
        # Keras' shape inference (symbolic scope) may stand in a placeholder length (torch: 83).
        if isinstance(length, int) and isinstance(start_index, int) and not in_symbolic_scope():
            if start_index + length > self.max_length:
                raise ValueError(
                    f"Positions up to {start_index + length} exceed the learned table. "
                    f"Received: seq_len={length}, start_index={start_index}, "
                    f"max_length={self.max_length}"
                )
        # A gather, not a slice of dynamic size: backends trace it with an unknown seq_len.
        # Clipping only matters for those symbolic traces; callers keep seq_len <= max_length.
        positions = ops.minimum(ops.arange(shape[-2]) + start_index, self.max_length - 1)
        rows = ops.take(self.position_embeddings, positions, axis=0)  # (seq_len, d_model)
        return ops.broadcast_to(ops.cast(rows, self.compute_dtype), shape)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
