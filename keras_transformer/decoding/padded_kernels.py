"""The decoder's `Dense` weights copied once per search into wider, zero-padded buffers.

Keras keeps a Dense kernel `(in, units)` with rows `units` floats apart. For the small
products of a decoding step (one token per hypothesis against the base model's `(512, 2048)`
kernels), oneDNN's AVX2 kernels run faster when the rows are `units + PAD` floats apart: with
`units` a multiple of 512 floats (2 KiB), the rows of a kernel fall on the same cache sets.
On AVX-512 and under Eigen the padding changes little. The measurements and their commands:
benchmarks/results/2026-11-25-kernel-layout.md and
benchmarks/results/2026-11-26-issue-49-keep-or-drop.md.

A weight re-layout for decoding speed only: the layers know nothing of it. The production
search (`incremental.per_source_step(..., pad_kernels=True)`) pads once, before its loop, and
its step (`per_source.decoder_step`) multiplies through `dense`:

    kernels = decoder_kernels(model, rows)     # per decoder layer, once per search
    y = dense(layer, x, kernels[i]["feed_forward"]["inner"])   # == layer(x)

Whether a search pads is the caller's argument; `onednn.padded_kernels_faster` is the rule
the commands apply (`KERAS_TRANSFORMER_PAD_KERNELS=1|0` overrides it: an export traced on one
kind of machine for servers of another).
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.checks import env_switch

PAD = 16  # floats added to each kernel row: one 64-byte cache line
# Narrower kernels stay as they are: with `units` of 128 or 256 the padding cost more than it
# saved (benchmarks/results/2026-11-25-kernel-layout.md).
MIN_UNITS = 512
# A search pads only with at least this many rows (items x beam) at its start: the copy costs
# more than it saves below (benchmarks/results/2026-11-25-kernel-layout.md).
MIN_ROWS = 64
ENV_VAR = "KERAS_TRANSFORMER_PAD_KERNELS"  # "1" or "0": overrides the CPU rule


def padded_kernel(layer: keras.layers.Dense, pad: int = PAD, min_units: int = MIN_UNITS) -> dict:
    """`{"kernel": (in, units + pad), "bias": (units + pad,) or absent}`: the layer's weights
    in its compute dtype (so the step casts nothing), zero in the extra columns. `pad=0`, or
    a layer narrower than `min_units`, copies nothing (the same structure, for a `tf.cond`
    that pads only large searches)."""
    padded = {"kernel": ops.cast(layer.kernel, layer.compute_dtype)}  # (in, units)
    if layer.bias is not None:
        padded["bias"] = ops.cast(layer.bias, layer.compute_dtype)  # (units,)
    if pad and layer.units >= min_units:
        padded["kernel"] = ops.pad(padded["kernel"], [[0, 0], [0, pad]])  # -> (in, units + pad)
        if "bias" in padded:
            padded["bias"] = ops.pad(padded["bias"], [[0, pad]])
    return padded


def dense(layer: keras.layers.Dense, inputs, padded: dict | None = None):
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


def step_denses(layer) -> dict:
    """The `Dense` layers a `DecoderLayer`'s decoding step multiplies by: `{"self_attention":
    {"query", "key", "value", "output"}, "cross_attention": {"query", "output"},
    "feed_forward": {"inner", "outer"}}` (the cross keys/values are projected once per search,
    before the loop)."""
    self_attention, cross = layer.self_attention, layer.cross_attention
    return {
        "self_attention": {
            "query": self_attention.query_dense,
            "key": self_attention.key_dense,
            "value": self_attention.value_dense,
            "output": self_attention.output_dense,
        },
        "cross_attention": {"query": cross.query_dense, "output": cross.output_dense},
        "feed_forward": {"inner": layer.feed_forward.inner, "outer": layer.feed_forward.outer},
    }


def layer_kernels(layer, pad: int = PAD) -> dict:
    """A `DecoderLayer`'s step weights: each `Dense` of `step_denses(layer)` as
    `padded_kernel(...)`, in the same structure."""
    return tf.nest.map_structure(lambda dense: padded_kernel(dense, pad), step_denses(layer))


def decoder_kernels(model, rows) -> list:
    """Per decoder layer of `model`, `layer_kernels`: padded when the search has at least
    `MIN_ROWS` rows (int32 scalar `rows`, a `tf.cond`), else the weights as they are."""
    layers = model.decoder.layers
    return tf.cond(
        rows >= MIN_ROWS,
        lambda: [layer_kernels(layer) for layer in layers],
        lambda: [layer_kernels(layer, pad=0) for layer in layers],
    )


def default_pad_kernels() -> bool:
    """Whether the commands' searches pad: `KERAS_TRANSFORMER_PAD_KERNELS=1|0` if set, else
    `onednn.padded_kernels_faster()` (this CPU's rule)."""
    override = env_switch(ENV_VAR)
    if override is not None:
        return override
    from keras_transformer import onednn

    return onednn.padded_kernels_faster()
