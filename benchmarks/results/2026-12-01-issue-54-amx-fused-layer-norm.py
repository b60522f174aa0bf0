"""Issue 54 on an AMX Xeon: the decoder's layer norms written in the pattern that grappler's
remapper turns into oneDNN's `_MklLayerNorm` (reshape, `FusedBatchNormV3` with unit scale,
reshape, times gamma, plus beta: tf-keras' fused layer norm), against Keras 3's (mean and
variance ops, in float32 for a bfloat16 model).

    PYTHONPATH=. python benchmarks/results/2026-12-01-issue-54-amx-fused-layer-norm.py \
        RUN DTYPE MODE

MODE `keras` or `fused` (every `LayerNormalization.call` of this process patched): ms a step of
`decode_benchmark.forced_search` (the production search, EOS masked out) for 64 and 1
sources of 24 random ids, beam 4 (`step_ms` of 2026-12-01-issue-54-amx-step-by-rows.py); the largest
difference of one layer norm's outputs between the two ways; the layer-norm op types of one
profiled 8-step search (is `_MklLayerNorm` there?). A probe kept as the command behind
2026-12-01-issue-54-amx.md; not package code.
"""

import sys

from keras_transformer import malloc, onednn

onednn.prefer_onednn()  # as the commands do

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.dated import script  # noqa: E402
from benchmarks.decode_benchmark import forced_search  # noqa: E402
from keras_transformer import artifacts  # noqa: E402

step_ops = script("2026-11-29-avx2-step-ops.py")
by_rows = script("2026-12-01-issue-54-amx-step-by-rows.py")  # its step_ms
KERAS_CALL = keras.layers.LayerNormalization.call


def fused_call(self, x):
    """The layer's normalization over the last axis as reshape + `FusedBatchNormV3` + reshape,
    then `* gamma + beta`."""
    shape = tf.shape(x)
    rows = tf.size(x) // shape[-1]
    y = tf.reshape(x, tf.stack([1, rows, shape[-1], 1]))  # (..., d) -> (1, rows, d, 1): NCHW
    ones, zeros = tf.fill([rows], 1.0), tf.fill([rows], 0.0)
    y, _, _ = tf.compat.v1.nn.fused_batch_norm(
        y, scale=ones, offset=zeros, epsilon=self.epsilon, data_format="NCHW"
    )
    y = tf.reshape(y, shape)  # -> (..., d)
    return y * tf.cast(self.gamma, y.dtype) + tf.cast(self.beta, y.dtype)


def main(run: str, dtype: str, mode: str) -> None:
    malloc.keep_freed_memory()
    model, config, _ = artifacts.load_trained(run, dtype=dtype)
    norm = model.decoder.layers[0].attention_norm
    x = tf.cast(tf.random.normal([256, 1, config.d_model]), model.compute_dtype)
    diff = tf.abs(
        tf.cast(KERAS_CALL(norm, x), tf.float32) - tf.cast(fused_call(norm, x), tf.float32)
    )
    print(f"{dtype}: one layer norm, the largest difference {float(tf.reduce_max(diff)):.3g}")
    if mode == "fused":
        keras.layers.LayerNormalization.call = fused_call
    for items in (64, 1):
        ms = by_rows.step_ms(model, config, items)
        print(f"{dtype} {mode}: {4 * items} rows, {ms:.2f} ms a step", flush=True)
    search = forced_search(model, config, 4, 8)
    source = tf.constant(np.random.RandomState(0).randint(4, 32000, (64, 24)), tf.int32)
    search(source)
    _, rows = step_ops.profile(lambda: search(source).numpy())
    kinds = {"_MklLayerNorm", "FusedBatchNormV3", "Mean", "SquaredDifference", "Rsqrt"}
    found = [(k, round(ms), n) for k, ms, n in step_ops.summed(rows, lambda r: r["type"])]
    print("layer-norm ops (type, self ms, events):", [f for f in found if f[0] in kinds])


if __name__ == "__main__":
    main(*sys.argv[1:4])
