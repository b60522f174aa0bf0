"""Issue 54, AVX2: the cost of one attention product of a base beam-search step, written
several ways. The shapes are the per-source search's (`decoding/per_source.py`): 32 sources,
8 heads, the 4 beams' queries `(32, 8, 4, 64)` against `n` keys per source and head
`(32, 8, n, 64)`: 256 products of `(4, 64) x (64, n)`.

    PYTHONPATH=. python benchmarks/results/2026-11-29-issue-54-attention-products.py \
        [INTRA INTER] [--jit]

Each form runs 12 times in a chain (each product waits for the one before, as a step's
layers do) inside one `tf.function`, its inputs passed as arguments (not constants, which
grappler would fold); ms per product, median of 9 calls. INTRA/INTER: TensorFlow's thread
pools (default 2 2, the 2-core machine's). `--jit`: every chain under XLA.
"""

import sys
import time

from keras_transformer import onednn

onednn.prefer_onednn()  # as the commands do

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import machine  # noqa: E402

CHAIN = 12
FORMS = {
    # the search's own: an einsum, a BatchMatMulV2 with the keys read transposed
    "einsum": lambda q, k: tf.einsum("ihqd,ihkd->ihqk", q, k),
    # the keys' products with the queries, transposed back
    "keys first": lambda q, k: tf.linalg.matrix_transpose(tf.matmul(k, q, transpose_b=True)),
    # one (256, 4, 64) x (256, n, 64)^T product
    "flat batch": lambda q, k: tf.reshape(
        tf.matmul(tf.reshape(q, [256, 4, 64]), tf.reshape(k, [256, -1, 64]), transpose_b=True),
        tf.concat([tf.shape(q)[:3], tf.shape(k)[2:3]], 0),
    ),
    # broadcast multiply and sum: (32, 8, 4, n, 64) in memory
    "multiply-sum": lambda q, k: tf.reduce_sum(q[:, :, :, None, :] * k[:, :, None, :, :], -1),
    # two products of 16 sources each, independent (the two inter-op threads)
    "two halves": lambda q, k: tf.concat(
        [tf.einsum("ihqd,ihkd->ihqk", a, b) for a, b in zip(tf.split(q, 2), tf.split(k, 2))], 0
    ),
}


def chained(form, jit: bool):
    def run(q, keys):  # keys (6, 32, 8, n, 64)
        x = q
        for i in range(CHAIN):
            scores = form(x, keys[i % 6])  # (32, 8, 4, n)
            x = x + tf.reduce_sum(scores) * 0.0  # the next product waits for this one
        return tf.reduce_sum(x)

    return tf.function(run, autograph=False, jit_compile=jit)


def ms_per_product(fn, args) -> float:
    fn(*args).numpy()
    fn(*args).numpy()
    times = []
    for _ in range(9):
        start = time.perf_counter()
        fn(*args).numpy()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) / CHAIN * 1e3


def main(argv) -> None:
    jit = "--jit" in argv
    threads = [int(a) for a in argv if a.isdigit()] or [2, 2]
    tf.config.threading.set_intra_op_parallelism_threads(threads[0])
    tf.config.threading.set_inter_op_parallelism_threads(threads[1])
    rng = np.random.default_rng(0)
    q = tf.constant(rng.standard_normal((32, 8, 4, 64), dtype=np.float32))
    print(f"{machine.description()}; TF {tf.__version__}, oneDNN {onednn.onednn_enabled()}, "
          f"intra/inter {threads[0]}/{threads[1]}, XLA {jit}")  # fmt: skip
    print("| keys n | " + " | ".join(FORMS) + " | GFLOP/s (einsum) |")
    print("|---:|" + "---:|" * (len(FORMS) + 1))
    for n in (32, 64, 128):
        keys = tf.constant(rng.standard_normal((6, 32, 8, n, 64), dtype=np.float32))
        ms = {name: ms_per_product(chained(form, jit), (q, keys)) for name, form in FORMS.items()}
        flops = 2 * 256 * 4 * 64 * n
        cells = " | ".join(f"{v:.3f}" for v in ms.values())
        print(f"| {n} | {cells} | {flops / ms['einsum'] / 1e6:.1f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
