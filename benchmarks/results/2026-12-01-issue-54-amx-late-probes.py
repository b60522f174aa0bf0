"""Issue 54 on an AMX Xeon, two late probes of a 256-row bfloat16 step of the trained base.

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

`step`: `decode_benchmark.forced_search` (EOS masked out), 64 sources of 24 random ids, beam 4,
bfloat16; ms a step = (best of 3 of 40 steps - best of 3 of 8 steps) / 32. `selection`: each
function 20 times in a `tf.while_loop`, ms a call, medians of 5 alternated rounds, float32
logits at 256 and 64 rows.
"""

import importlib.util
import json
import os
import pathlib
import sys
import time

from keras_transformer import malloc, onednn

onednn.prefer_onednn()  # as the commands do

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.decode_benchmark import forced_search  # noqa: E402
from keras_transformer import artifacts  # noqa: E402


def step(run: str) -> None:
    malloc.keep_freed_memory()
    if os.environ.get("AUTOCLUSTER"):
        tf.config.optimizer.set_jit("autoclustering")
    model, config, _ = artifacts.load_trained(run, dtype="bfloat16")
    source = tf.constant(np.random.RandomState(0).randint(4, 32000, (64, 24)), tf.int32)
    best = {}
    for steps in (8, 40):
        search = forced_search(model, config, 4, steps)
        search(source).numpy()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            search(source).numpy()
            times.append(time.perf_counter() - start)
        best[steps] = min(times)
    print(f"ms a step: {(best[40] - best[8]) / 32 * 1e3:.1f}")


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


def repeated(fn, repeats: int):
    @tf.function
    def run(x):
        def body(i, acc):
            y = fn(x + tf.cast(i, x.dtype) * 0)  # a new input each time
            return i + 1, acc + tf.reduce_sum(y[:, :1])

        return tf.while_loop(lambda i, _: i < repeats, body, (0, 0.0), parallel_iterations=1)[1]

    return run


def selection(repeats: int = 20, rounds: int = 5) -> None:
    rng = np.random.RandomState(0)
    for rows in (256, 64):
        x = tf.constant(rng.randn(rows, 32000).astype(np.float32) * 3)
        runs = {k: repeated(fn, repeats) for k, fn in SELECTION.items()}
        times = {k: [] for k in runs}
        for run in runs.values():
            run(x).numpy()
        for _ in range(rounds):
            for k, run in runs.items():
                start = time.perf_counter()
                run(x).numpy()
                times[k].append((time.perf_counter() - start) / repeats * 1e3)
        print(rows, "rows, ms:", {k: round(float(np.median(v)), 2) for k, v in times.items()})


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


def bias(repeats: int = 50, rounds: int = 7) -> None:
    rng = np.random.RandomState(0)
    w = tf.Variable(tf.cast(rng.randn(512, 2048) * 0.02, tf.bfloat16))
    b = tf.Variable(tf.cast(rng.randn(2048) * 0.02, tf.bfloat16))
    kinds = ("product only", "MatMul + BiasAdd (fused by grappler)", "batched product + Add",
             "in float32")  # fmt: skip
    for rows in (256, 4):
        x = tf.cast(rng.randn(rows, 512), tf.bfloat16)
        runs = {k: repeated(lambda x, k=k: tf.cast(with_bias(k, w, b)(x), tf.float32), repeats)
                for k in kinds}  # fmt: skip
        times = {k: [] for k in runs}
        for run in runs.values():
            run(x).numpy()
        for _ in range(rounds):
            for k, run in runs.items():
                start = time.perf_counter()
                run(x).numpy()
                times[k].append((time.perf_counter() - start) / repeats * 1e6)
        print(rows, "rows, us:", {k: round(float(np.median(v)), 1) for k, v in times.items()})


def profile(run: str) -> None:
    path = pathlib.Path(__file__).with_name("2026-12-01-issue-54-amx-idle-rows.py")
    spec = importlib.util.spec_from_file_location("amx_idle_rows", path)
    idle_rows = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(idle_rows)
    print(json.dumps(idle_rows.tail_profile(run, items=64), indent=1))


if __name__ == "__main__":
    modes = {"step": step, "profile": profile, "bias": bias, "selection": selection}
    modes[sys.argv[1]](*sys.argv[2:3])
