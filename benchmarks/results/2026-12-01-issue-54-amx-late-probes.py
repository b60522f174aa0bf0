"""Issue 54 on an AMX Xeon: late probes of a 256-row bfloat16 step of the trained base.

    # a step of the forced search of 64 sources (256 rows), as built and with TensorFlow's
    # auto-clustering of element-wise ops into XLA (the products stay on oneDNN):
    PYTHONPATH=. python benchmarks/results/2026-12-01-issue-54-amx-late-probes.py step RUN
    AUTOCLUSTER=1 TF_XLA_FLAGS="--tf_xla_cpu_global_jit --tf_xla_ops_to_cluster=FUSIBLE" \
        PYTHONPATH=. python benchmarks/results/2026-12-01-issue-54-amx-late-probes.py step RUN
    # the vocabulary-wide log-softmax against oneDNN's softmax and its parts, (rows, 32000):
    PYTHONPATH=. python benchmarks/results/2026-12-01-issue-54-amx-late-probes.py selection
    # a bfloat16 (rows, 512) x (512, 2048) product and its bias, four ways (add ONEDNN_VERBOSE=1
    # to see which oneDNN kernel each runs):
    PYTHONPATH=. python benchmarks/results/2026-12-01-issue-54-amx-late-probes.py bias
    # ops' self-time a step by op type at 64 sources (`...-amx-idle-rows.tail_profile`):
    PYTHONPATH=. python benchmarks/results/2026-12-01-issue-54-amx-late-probes.py profile RUN

`step`: `...-amx-step-by-rows.step_ms` at 64 sources (forced search, EOS masked out, 24
random ids, beam 4, bfloat16; ms a step = (40 steps - 8 steps) / 32, medians of 3).
`selection` and `bias`: `...-amx-idle-rows.alternated_us` (each function 20 or 50 times in a
`tf.while_loop`, medians of alternated rounds); `selection` on float32 logits at 256 and 64
rows, `bias` at 256 and 4 rows.
"""

import json
import os
import sys

from keras_transformer import malloc, onednn

onednn.prefer_onednn()  # as the commands do

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.dated import script  # noqa: E402
from keras_transformer import artifacts  # noqa: E402

idle_rows = script("2026-12-01-issue-54-amx-idle-rows.py")
step_by_rows = script("2026-12-01-issue-54-amx-step-by-rows.py")


def step(run: str) -> None:
    malloc.keep_freed_memory()
    if os.environ.get("AUTOCLUSTER"):
        tf.config.optimizer.set_jit("autoclustering")
    model, config, _ = artifacts.load_trained(run, dtype="bfloat16")
    print(f"ms a step: {step_by_rows.step_ms(model, config, 64):.1f}")


def shifted(x):
    return x - tf.reduce_max(x, -1, keepdims=True)


SELECTION = {
    "log_softmax": tf.nn.log_softmax,
    "softmax": tf.nn.softmax,
    "written out": lambda x: (
        shifted(x) - tf.math.log(tf.reduce_sum(tf.exp(shifted(x)), -1, keepdims=True))
    ),
    "logsumexp": lambda x: tf.reduce_logsumexp(x, -1, keepdims=True),
    "exp": tf.exp,
    "max": lambda x: tf.reduce_max(x, -1, keepdims=True),
}


def selection() -> None:
    rng = np.random.RandomState(0)
    for rows in (256, 64):
        x = tf.constant(rng.randn(rows, 32000).astype(np.float32) * 3)
        ms = {k: us / 1e3 for k, us in idle_rows.alternated_us(SELECTION, x, 20, 5).items()}
        print(rows, "rows, ms:", {k: round(v, 2) for k, v in ms.items()})


def with_bias(kind: str, w, b):
    """`(rows, 512) -> (rows, 2048)`: the product and its bias, as `kind` writes them."""

    def product(x):
        if kind == "product only":
            return tf.matmul(x, w)
        if kind == "MatMul + BiasAdd (fused by grappler)":
            return tf.nn.bias_add(tf.matmul(x, w), b)
        if kind == "batched product + Add":
            return tf.matmul(x[None], w[None])[0] + b
        # "in float32": the product in bfloat16, the bias added in float32
        return tf.cast(tf.cast(tf.matmul(x, w), tf.float32) + tf.cast(b, tf.float32), x.dtype)

    return product


def bias() -> None:
    rng = np.random.RandomState(0)
    w = tf.Variable(tf.cast(rng.randn(512, 2048) * 0.02, tf.bfloat16))
    b = tf.Variable(tf.cast(rng.randn(2048) * 0.02, tf.bfloat16))
    kinds = ("product only", "MatMul + BiasAdd (fused by grappler)", "batched product + Add",
             "in float32")  # fmt: skip
    for rows in (256, 4):
        x = tf.cast(rng.randn(rows, 512), tf.bfloat16)
        us = idle_rows.alternated_us({k: with_bias(k, w, b) for k in kinds}, x)
        print(rows, "rows, us:", {k: round(v, 1) for k, v in us.items()})


def profile(run: str) -> None:
    print(json.dumps(idle_rows.tail_profile(run, items=64), indent=1))


if __name__ == "__main__":
    modes = {"step": step, "profile": profile, "bias": bias, "selection": selection}
    modes[sys.argv[1]](*sys.argv[2:3])
