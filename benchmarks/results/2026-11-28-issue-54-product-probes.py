"""Issue 54, probes of the decoder's 4-row products under XLA (2026-11-28), beside
2026-11-27-issue-54-product-forms.py: each product depends on the one before (as in a
decoding step), so only the threads inside one product can run at once.

    python benchmarks/results/2026-11-28-issue-54-product-probes.py bandwidth|split|forms|cache

bandwidth: NumPy sums over 256 MB on 1 and 2 threads (GB/s). split: twelve feed-forward
blocks `(4, 512) x (512, 2048) x (2048, 512)`, weights from memory, each product as one
`tf.matmul`, split in 2 or 4 along the output, in 2 along the input, or over separately stored
halves. forms: the same blocks over `(out, in)` kernels as `x W^T`, `(W x^T)^T` and an
einsum. cache: 20 dependent `(4, d) x (d, d)` products, weights in cache, 50 times in an
in-graph loop, `(in, out)` against `(out, in)` with `transpose_b` (us a product). The command
behind 2026-11-28-issue-54-product-probes.md; not a workload.
"""

import sys
import threading
import time

import numpy as np
import tensorflow as tf

RNG = np.random.default_rng(0)


def median_ms(fn, args, rounds: int = 60) -> float:
    for _ in range(5):
        fn(*args)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(*args).numpy()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def bandwidth() -> None:
    values = np.ones(64 * 1024 * 1024, np.float32)  # 256 MB
    for threads in (1, 2):
        parts, best = np.array_split(values, threads), 1e9
        for _ in range(5):
            start = time.perf_counter()
            workers = [threading.Thread(target=np.sum, args=(p,)) for p in parts]
            [w.start() for w in workers]
            [w.join() for w in workers]
            best = min(best, time.perf_counter() - start)
        print(f"{threads} thread(s): {values.nbytes / best / 1e9:.1f} GB/s")


def _blocks(transposed: bool, layers: int = 12, d: int = 512, ff: int = 2048):
    def weight(rows, cols):
        w = RNG.standard_normal((rows, cols)) / rows**0.5
        return tf.constant(w.T if transposed else w, tf.float32)

    first = [weight(d, ff) for _ in range(layers)]
    second = [weight(ff, d) for _ in range(layers)]
    return tf.constant(RNG.standard_normal((4, d)), tf.float32), first, second


def _chain(form):
    def run(x, first, second):
        for a, b in zip(first, second):
            x = tf.nn.relu(form(tf.nn.relu(form(x, a)), b)) * 0.5 + x * 0.5
        return x

    return tf.function(run, jit_compile=True)


def _split_out(x, w, parts):
    size = w.shape[1] // parts  # (k, n) -> parts x (k, n / parts)
    return tf.concat([tf.matmul(x, w[:, i * size : (i + 1) * size]) for i in range(parts)], 1)


def _split_in(x, w):
    half = w.shape[0] // 2  # (k, n) -> 2 x (k / 2, n), summed
    return tf.matmul(x[:, :half], w[:half]) + tf.matmul(x[:, half:], w[half:])


def split() -> None:
    x, first, second = _blocks(False)
    megabytes = sum(int(tf.size(w)) for w in first + second) * 4 / 1e6
    forms = {
        "one matmul": tf.matmul,
        "split in 2 along the output": lambda x, w: _split_out(x, w, 2),
        "split in 4 along the output": lambda x, w: _split_out(x, w, 4),
        "split in 2 along the input": _split_in,
    }
    for name, form in forms.items():
        ms = median_ms(_chain(form), (x, first, second))
        print(f"{name}: {ms:.2f} ms, {megabytes / ms:.1f} GB/s")
    halves = lambda w, axis: [tf.identity(h) for h in tf.split(w, 2, axis)]  # noqa: E731
    stored = ([halves(w, 1) for w in first], [halves(w, 1) for w in second])
    run = _chain(lambda x, pair: tf.concat([tf.matmul(x, h) for h in pair], 1))
    ms = median_ms(run, (x, *stored))
    print(f"halves stored apart: {ms:.2f} ms, {megabytes / ms:.1f} GB/s")


def forms() -> None:
    x, first, second = _blocks(True)
    megabytes = sum(int(tf.size(w)) for w in first + second) * 4 / 1e6
    variants = {
        "x W^T (transpose_b)": lambda x, wt: tf.matmul(x, wt, transpose_b=True),
        "(W x^T)^T": lambda x, wt: tf.transpose(tf.matmul(wt, x, transpose_b=True)),
        "einsum nk,bk->bn": lambda x, wt: tf.einsum("nk,bk->bn", wt, x),
    }
    for round_ in range(3):
        for name, form in variants.items():
            ms = median_ms(_chain(form), (x, first, second))
            print(f"round {round_} {name}: {ms:.2f} ms, {megabytes / ms:.1f} GB/s")


def cache(repeats: int = 50, count: int = 20) -> None:
    for d in (128, 256, 512):
        x = tf.constant(RNG.standard_normal((4, d)), tf.float32)
        draws = [RNG.standard_normal((d, d)) / d**0.5 for _ in range(count)]
        kernels = [tf.constant(w, tf.float32) for w in draws]
        args = (x, kernels, [tf.transpose(w) for w in kernels])

        def looped(step):
            def run(x, ws, wts):
                def body(i, x):
                    for w, wt in zip(ws, wts):
                        x = tf.tanh(step(x, w, wt))
                    return i + 1, x

                return tf.while_loop(lambda i, _: i < repeats, body, (0, x))[1]

            return tf.function(run, jit_compile=True)

        empty = median_ms(looped(lambda x, w, wt: x), args, 30)
        plain = median_ms(looped(lambda x, w, wt: tf.matmul(x, w)), args, 30)
        trans = median_ms(looped(lambda x, w, wt: tf.matmul(x, wt, transpose_b=True)), args, 30)
        per = 1e3 / (repeats * count)
        print(f"d {d}: (in, out) {(plain - empty) * per:.1f} us, "
              f"(out, in) transpose_b {(trans - empty) * per:.1f} us")  # fmt: skip


if __name__ == "__main__":
    {"bandwidth": bandwidth, "split": split, "forms": forms, "cache": cache}[sys.argv[1]]()
