"""One weight matrix for the source embedding, the target embedding and the pre-softmax
projection; embeddings are multiplied by sqrt(d_model)  (paper, section 3.4)."""

from __future__ import annotations

import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class SharedEmbedding(keras.layers.Layer):
    """Token embedding whose transpose is also the output projection.

    Args:
        vocab_size: number of subword ids.
        d_model: embedding width.
        scale: multiply embeddings by sqrt(d_model) (paper: True).
        initializer: of the `(vocab_size, d_model)` matrix. The default normal with stddev
            d_model^-0.5 keeps the scaled embeddings at unit variance.

    Call arguments:
        inputs: int ids `(batch, seq_len)`, or with `reverse=True` hidden states
            `(batch, seq_len, d_model)`.
        reverse: False: look up embeddings, returns `(batch, seq_len, d_model)`.
            True: pre-softmax projection `x E^T`, returns float32 logits
            `(batch, seq_len, vocab_size)`.
        output_kernel: with `reverse`, `E^T` already transposed, `(d_model, vocab_size)` in
            the compute dtype (`output_kernel()`): a decoding loop transposes once per
            search, not at every step; a product with a pre-transposed right-hand side is
            the faster one on our CPUs (designs "rows" against "rows+T" of `benchmarks/run.py
            decode ab`, benchmarks/results/2026-11-25-decode-slot-cache.md, with the command).

    Example:
    >>> emb = SharedEmbedding(vocab_size=37000, d_model=512)
    >>> x = emb(keras.ops.array([[5, 6, 7]]))           # (1, 3, 512)
    >>> logits = emb(x, reverse=True)                   # (1, 3, 37000)
    """

    def __init__(
        self, vocab_size: int, d_model: int, scale: bool = True, initializer=None, **kwargs
    ):
        super().__init__(**kwargs)
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int. Received: {name}={value!r}")
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = scale
        if initializer is None:
            initializer = keras.initializers.RandomNormal(stddev=d_model**-0.5)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocab_size, self.d_model), initializer=self.initializer
        )
        self.built = True

    def output_kernel(self):
        """`E^T`, `(d_model, vocab_size)` in the compute dtype, for `call(..., output_kernel=)`."""
        return ops.transpose(ops.cast(self.embeddings, self.compute_dtype))

    def call(self, inputs, reverse=False, output_kernel=None):
        if reverse:
            if output_kernel is None:
                output_kernel = self.output_kernel()
            # One 2-D matrix product: "bld,vd->blv" as an einsum lowers to a broadcasting
            # batched product on TensorFlow, slower forward plus backward on CPU.
            leading = ops.shape(inputs)[:-1]
            flat = ops.reshape(inputs, (-1, self.d_model))  # -> (batch * seq_len, d_model)
            logits = ops.matmul(flat, output_kernel)  # -> (batch * seq_len, vocab)
            logits = ops.reshape(logits, (*leading, self.vocab_size))  # -> (batch, seq_len, vocab)
            return ops.cast(logits, "float32")
        ids = ops.cast(inputs, "int32")
        vectors = ops.take(self.embeddings, ids, axis=0)  # -> (batch, seq_len, d_model)
        vectors = ops.cast(vectors, self.compute_dtype)
        if self.scale:
            vectors = vectors * ops.cast(math.sqrt(self.d_model), self.compute_dtype)
        return vectors

    def compute_output_spec(self, inputs, reverse=False, output_kernel=None):
        if reverse:
            shape = tuple(inputs.shape[:-1]) + (self.vocab_size,)
            return keras.KerasTensor(shape, dtype="float32")
        return keras.KerasTensor(tuple(inputs.shape) + (self.d_model,), dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "d_model": self.d_model,
                "scale": self.scale,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
