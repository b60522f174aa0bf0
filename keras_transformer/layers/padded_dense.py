"""A `keras.layers.Dense` applied with its kernel copied into a wider, zero-padded buffer.

Keras keeps a Dense kernel `(in, units)` with rows `units` floats apart. For the small
products of a decoding step (one token per hypothesis: 4-128 rows against the base model's
`(512, 2048)` kernel), oneDNN's AVX2 kernels run up to 1.68x faster when the rows are
`units + PAD` floats apart: with `units` a multiple of 512 floats (2 KiB), the rows of a
kernel fall on the same cache sets. On AVX-512 and under Eigen the padding changes little
(0.92-1.17x): benchmarks/results/2026-11-25-kernel-layout.md. A decoding loop therefore pads
the decoder's kernels once per search, outside the loop, when `onednn.padded_kernels_faster()`
says so, and each step calls `apply(layer, x, padded)`.

    padded = padded_kernel(layer)              # {"kernel": (in, units + PAD), "bias": ...}
    y = apply(layer, x, padded)                # == layer(x), x: (..., in) -> (..., units)
"""

from __future__ import annotations

import keras
from keras import ops

PAD = 16  # floats added to each kernel row: one 64-byte cache line
# Narrower kernels stay as they are: with `units` of 128 or 256 the padding cost 0-18 %
# (cold caches, 4-128 rows, capped to AVX2); from 512 on it saved 5-40 %.
MIN_UNITS = 512


def padded_kernel(layer: keras.layers.Dense, pad: int = PAD) -> dict:
    """`{"kernel": (in, units + pad), "bias": (units + pad,) or absent}`: the layer's weights
    in its compute dtype (so the step casts nothing), zero in the extra columns. `pad=0`, or
    a layer narrower than `MIN_UNITS`, copies nothing (the same structure, for a `tf.cond`
    that pads only large batches)."""
    padded = {"kernel": ops.cast(layer.kernel, layer.compute_dtype)}  # (in, units)
    if layer.bias is not None:
        padded["bias"] = ops.cast(layer.bias, layer.compute_dtype)  # (units,)
    if pad and layer.units >= MIN_UNITS:
        padded["kernel"] = ops.pad(padded["kernel"], [[0, 0], [0, pad]])  # -> (in, units + pad)
        if "bias" in padded:
            padded["bias"] = ops.pad(padded["bias"], [[0, pad]])
    return padded


def apply(layer: keras.layers.Dense, inputs, padded: dict | None = None):
    """`layer(inputs)`, computed with `padded` (from `padded_kernel(layer)`) when given.

    Args:
        layer: a built `Dense` (its activation is applied; its weights are not read).
        inputs: `(..., in)` in the layer's compute dtype.
        padded: None (call the layer) or `padded_kernel(layer)`.

    Returns:
        `(..., units)`.
    """
    if padded is None:
        return layer(inputs)
    leading = ops.shape(inputs)[:-1]
    flat = ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))  # -> (rows, in)
    outputs = ops.matmul(flat, padded["kernel"])  # -> (rows, units + pad)
    if "bias" in padded:
        outputs = ops.add(outputs, padded["bias"])
    if layer.activation is not None:
        outputs = layer.activation(outputs)
    outputs = outputs[:, : layer.units]  # -> (rows, units); no copy when pad is 0
    return ops.reshape(outputs, (*leading, layer.units))  # -> (..., units)
