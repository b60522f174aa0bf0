"""Issue 54, AVX2: a decoding step's weight products at 128 rows (32 sources x beam 4), with the
kernel as Keras keeps it `(in, units)`, padded by `padded_kernels.PAD` columns, or read
transposed; OpenBLAS (NumPy) beside them.

    PYTHONPATH=. python benchmarks/results/2026-11-29-issue-54-padded-products.py [ROWS]

Each product runs 24 times (4 for the vocabulary's) in one `tf.function`, over 4 kernels (so
they do not all sit in cache), the input a constant and the kernels variables (not folded);
ms per product and GFLOP/s, the median of 3 alternated rounds of 7 calls.
"""

import sys
import time

from keras_transformer import onednn

onednn.prefer_onednn()  # as the commands do

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import machine  # noqa: E402
from keras_transformer.decoding.padded_kernels import PAD  # noqa: E402

SHAPES = [(512, 512), (512, 1536), (512, 2048), (2048, 512), (512, 32000)]


def seconds_per_product(fn, reps: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(7):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) / reps


def chain(x, kernels, reps: int, transpose_b: bool = False):
    @tf.function(autograph=False)
    def run():
        total = 0.0
        for i in range(reps):
            y = tf.matmul(x, kernels[i % len(kernels)], transpose_b=transpose_b)
            total += tf.reduce_sum(y[:1, :1])
        return total

    return run


def numpy_chain(x, kernels, reps: int):
    def run():
        return [x @ kernels[i % len(kernels)] for i in range(reps)]

    return run


def main(rows: int) -> None:
    rng = np.random.default_rng(0)
    print(f"{machine.description()}; TF {tf.__version__}, oneDNN {onednn.onednn_enabled()}")
    print("| rows x in x units | as Keras keeps it | padded | transposed | OpenBLAS |")
    print("|---|---:|---:|---:|---:|")
    for k, n in SHAPES:
        reps = 24 if n < 10000 else 4
        x = tf.constant(rng.standard_normal((rows, k), dtype=np.float32))
        weights = [rng.standard_normal((k, n), dtype=np.float32) * 0.01 for _ in range(4)]
        forms = {
            "plain": chain(x, [tf.Variable(w) for w in weights], reps),
            "padded": chain(x, [tf.Variable(np.pad(w, [[0, 0], [0, PAD]])) for w in weights], reps),
            "transposed": chain(
                x, [tf.Variable(np.ascontiguousarray(w.T)) for w in weights], reps, True
            ),
        }
        times = {name: [] for name in forms}
        for _ in range(3):
            for name, fn in forms.items():
                times[name].append(seconds_per_product(fn, reps))
        blas = seconds_per_product(numpy_chain(x.numpy(), weights, reps), reps)
        flop = 2 * rows * k * n
        cells = [float(np.median(t)) for t in times.values()] + [blas]
        row = " | ".join(f"{s * 1e3:.2f} ms, {flop / s / 1e9:.0f} GF/s" for s in cells)
        print(f"| {rows} x {k} x {n} | {row} |", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 128)
