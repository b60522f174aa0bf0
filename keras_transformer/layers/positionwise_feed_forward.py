"""FFN(x) = max(0, x W1 + b1) W2 + b2  (paper, equation 2)."""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionwiseFeedForward(keras.layers.Layer):
    """Two linear maps with a ReLU between them, applied to each position alike.

    Args:
        d_ff: inner width (paper: 2048 base, 4096 big).
        activation: the non-linearity (paper: "relu").
        dropout: dropout on the inner activations (the paper uses 0).

    Call arguments:
        inputs: `(batch, seq_len, d_model)`.
        training: whether dropout is active.

    Returns:
        `(batch, seq_len, d_model)`.

    Example:
    >>> ffn = PositionwiseFeedForward(d_ff=2048)
    >>> y = ffn(keras.random.normal((2, 10, 512)))
    """

    def __init__(self, d_ff: int, activation: str = "relu", dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(d_ff, int) or d_ff <= 0:
            raise ValueError(f"d_ff must be a positive int. Received: d_ff={d_ff!r}")
        self.d_ff = d_ff
        self.activation = activation
        self.dropout = dropout
        policy = self.dtype_policy
        self.inner = keras.layers.Dense(d_ff, activation=activation, dtype=policy, name="inner")
        self.inner_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.outer = None

    def build(self, input_shape):
        self.inner.build(input_shape)
        self.outer = keras.layers.Dense(input_shape[-1], dtype=self.dtype_policy, name="outer")
        self.outer.build(tuple(input_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, inputs, training=None):
        hidden = self.inner(inputs)  # (batch, seq_len, d_ff), ReLU applied
        hidden = self.inner_dropout(hidden, training=training)
        return self.outer(hidden)  # (batch, seq_len, d_model)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"d_ff": self.d_ff, "activation": self.activation, "dropout": self.dropout})
        return config
