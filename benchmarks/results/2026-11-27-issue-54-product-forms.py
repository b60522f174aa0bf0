"""Issue 54, a probe: the decoder's products of 4 rows (beam 4, one sentence) in other forms
of stock TensorFlow ops under XLA, against `tf.matmul`.

    python benchmarks/results/2026-11-27-issue-54-product-forms.py [--rounds 200]

Part 1, weights from memory (base sizes): for each shape `(4, k) x (k, n)`, enough distinct
random weight matrices to pass 64 MB (more than the 32 MB L3), each product's rows summed so
every output is used; forms: `tf.matmul` under XLA and without it; four one-row products
(`x[i:i+1] @ W`, XLA's matrix-vector emitter), of `W` and of `W^T`; a multiply-and-reduce
over `W` `(k, n)` and over `W^T` `(n, k)`. Part 2, weights in cache (quick and a middle size):
ten dependent feed-forward blocks `x + relu(x W1) W2` in the same forms. Medians; all forms
checked equal to `tf.matmul` within float32 rounding. A one-off study kept as the command
behind 2026-11-27-issue-54-late-probes.md; not a workload.
"""

import argparse
import time

import numpy as np
import tensorflow as tf


def median_ms(fn, args, rounds: int) -> float:
    for _ in range(5):
        fn(*args)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(*args)[0].numpy()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def matmul(x, w):
    return tf.matmul(x, w)  # (4, k) x (k, n) -> (4, n)


def rows_matmul(x, w):
    return tf.concat([tf.matmul(x[i : i + 1], w) for i in range(4)], 0)  # 4 x (1, n)


def rows_matmul_t(x, wt):
    return tf.concat([tf.matmul(x[i : i + 1], wt, transpose_b=True) for i in range(4)], 0)


def reduce_form(x, w):
    return tf.reduce_sum(x[:, :, None] * w[None], axis=1)  # (4, k, 1) * (1, k, n) -> (4, n)


def reduce_form_t(x, wt):
    return tf.reduce_sum(x[:, None, :] * wt[None], axis=2)  # (4, 1, k) * (1, n, k) -> (4, n)


FORMS = {
    "matmul": (matmul, False),
    "4 one-row products": (rows_matmul, False),
    "4 one-row products of W^T": (rows_matmul_t, True),
    "multiply-reduce": (reduce_form, False),
    "multiply-reduce of W^T": (reduce_form_t, True),
}


def from_memory(rng, rounds: int) -> None:
    print("weights from memory: (4, k) x (k, n), GB/s of weights read")
    for k, n in [(512, 512), (512, 2048), (2048, 512), (512, 32000)]:
        x = tf.constant(rng.standard_normal((4, k)), tf.float32)
        count = max(1, int(64e6 / (k * n * 4)))
        weights = [tf.constant(rng.standard_normal((k, n)), tf.float32) for _ in range(count)]
        transposed = [tf.transpose(w) for w in weights]
        megabytes = count * k * n * 4 / 1e6
        reference = None
        for name, (form, wants_t) in FORMS.items():

            def run(x, *ws, form=form):
                return tf.add_n([tf.reduce_sum(form(x, w), 0) for w in ws])[None]

            args = (x, *(transposed if wants_t else weights))
            fn = tf.function(run, jit_compile=True)
            out = fn(*args).numpy()
            reference = out if reference is None else reference
            np.testing.assert_allclose(out, reference, rtol=1e-4, atol=2e-2)
            ms = median_ms(fn, args, rounds)
            print(f"  {k} x {n} ({count} matrices) {name}: {ms:.3f} ms, {megabytes / ms:.1f}")
        plain = tf.function(lambda x, *ws: tf.add_n([tf.reduce_sum(x @ w, 0) for w in ws])[None])
        ms = median_ms(plain, (x, *weights), rounds)
        print(f"  {k} x {n} matmul without XLA: {ms:.3f} ms, {megabytes / ms:.1f}")


def in_cache(rng, rounds: int) -> None:
    print("weights in cache: 10 dependent blocks x + relu(x W1) W2, us a block")
    for d, ff in [(128, 512), (256, 1024)]:
        x = tf.constant(rng.standard_normal((4, d)), tf.float32)
        w1 = [tf.constant(rng.standard_normal((d, ff)) / d**0.5, tf.float32) for _ in range(10)]
        w2 = [tf.constant(rng.standard_normal((ff, d)) / ff**0.5, tf.float32) for _ in range(10)]
        reference = None
        for name in ("matmul", "multiply-reduce", "multiply-reduce of W^T"):
            form, wants_t = FORMS[name]
            first = [tf.transpose(w) for w in w1] if wants_t else w1
            second = [tf.transpose(w) for w in w2] if wants_t else w2

            def run(x, first, second, form=form):
                for a, b in zip(first, second):
                    x = x + form(tf.nn.relu(form(x, a)), b)
                return x

            fn = tf.function(run, jit_compile=True)
            out = fn(x, first, second).numpy()
            reference = out if reference is None else reference
            np.testing.assert_allclose(out, reference, rtol=1e-4, atol=1e-3)
            us = 1e3 * median_ms(fn, (x, first, second), rounds) / 10
            print(f"  d_model {d}, d_ff {ff}, {name}: {us:.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200, help="timed calls of each form")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    from_memory(rng, args.rounds)
    in_cache(rng, args.rounds)


if __name__ == "__main__":
    main()
