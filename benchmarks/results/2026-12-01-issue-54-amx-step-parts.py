"""Issue 54 on an AMX Xeon: two parts of a decoding step alone, by rows, in float32 and bfloat16
(oneDNN's AMX kernels for bfloat16 here): the matrix products by weight layout, and the
vocabulary-wide selection whole or in chunks of rows.

    PYTHONPATH=. python benchmarks/results/2026-12-01-issue-54-amx-step-parts.py OUT.json

Products:
For `rows` of 4 to 256 and the step's shapes `(rows, in) x (in, out)` (512 x 512, 512 x 2048,
2048 x 512, 512 x 32000), three ways with the weights in a variable:
`x @ W` (the step's layout), `x @ V^T` with V = W^T `(out, in)` stored (`transpose_b`: the
embedding as it is, for the output projection) and `(V @ x^T)^T`. Microseconds a product:
the best of 5 loops of 200 products, one at a time (`parallel_iterations=1`).

Selection: bfloat16 logits `(rows, 32000)` -> float32 -> `tf.nn.log_softmax` ->
`beam_search.top_k_rows(., 8)` (what `BeamSearch.extend` does to a step's logits), whole or
split into 2 to 16 chunks of rows (`tf.split`, outputs concatenated), milliseconds (timed the
same way, 50 a loop) and whether each split gives the whole's values and ids bit for bit.
"""

import json
import sys
import time

from keras_transformer import onednn

onednn.prefer_onednn()  # as the commands do

import tensorflow as tf  # noqa: E402

from benchmarks import machine  # noqa: E402
from keras_transformer.decoding.beam_search import top_k_rows  # noqa: E402

LAYOUTS = {
    "x @ W": lambda x, w, v: tf.matmul(x, w),
    "x @ V^T": lambda x, w, v: tf.matmul(x, v, transpose_b=True),
    "(V @ x^T)^T": lambda x, w, v: tf.transpose(tf.matmul(v, x, transpose_b=True)),
}
SHAPES = [(512, 512), (512, 2048), (2048, 512), (512, 32000)]


def microseconds(layout, x, w, v, count: int = 200) -> float:
    @tf.function(autograph=False)
    def loop(x):
        def body(i, total):
            y = layout(x, w, v)
            return i + 1, total + tf.cast(tf.reshape(y, [-1])[0], tf.float32)

        # parallel_iterations=1: one iteration at a time, as a decoding loop's steps run
        return tf.while_loop(lambda i, _: i < count, body, (0, 0.0), parallel_iterations=1)[1]

    loop(x)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        loop(x).numpy()
        times.append((time.perf_counter() - start) / count)
    return 1e6 * min(times)


def select(logits):
    return top_k_rows(tf.nn.log_softmax(tf.cast(logits, tf.float32)), 8)


def chunked(parts: int):
    def run(logits):
        found = [select(chunk) for chunk in tf.split(logits, parts)]  # (rows / parts, 8) each
        return tf.concat([v for v, _ in found], 0), tf.concat([i for _, i in found], 0)

    return run


def selection_rows() -> list[dict]:
    out = []
    for rows in (256, 128, 64, 16):
        logits = tf.cast(tf.random.normal([rows, 32000]) * 3, tf.bfloat16)
        whole = select(logits)
        row = dict(rows=rows, whole_ms=microseconds(lambda x, w, v: select(x)[0], logits,
                                                    None, None, 50) / 1e3)  # fmt: skip
        for parts in (2, 4, 8, 16):
            split = chunked(parts)
            values, ids = split(logits)
            same = bool(tf.reduce_all(values == whole[0]) & tf.reduce_all(ids == whole[1]))
            ms = microseconds(lambda x, w, v, f=split: f(x)[0], logits, None, None, 50) / 1e3
            row[f"split_{parts}"] = dict(ms=ms, same=same)
        out.append(row)
        print(row, flush=True)
    return out


def main(out: str) -> None:
    rows_out = []
    for dtype in (tf.bfloat16, tf.float32):
        for rows in (4, 16, 64, 256):
            for k, n in SHAPES:
                x = tf.cast(tf.random.normal([rows, k]), dtype)
                w = tf.Variable(tf.cast(tf.random.normal([k, n]), dtype))
                v = tf.Variable(tf.transpose(w))
                us = {name: microseconds(f, x, w, v) for name, f in LAYOUTS.items()}
                rows_out.append(dict(dtype=dtype.name, rows=rows, shape=[k, n], us=us))
                cells = " | ".join(f"{us[name]:.0f}" for name in LAYOUTS)
                print(f"| {dtype.name} | {rows} | {k} x {n} | {cells} |", flush=True)
    with open(out, "w") as f:
        json.dump({"machine": machine.description(), "tensorflow": tf.__version__,
                   "layouts": list(LAYOUTS), "rows": rows_out,
                   "selection": selection_rows()}, f, indent=1)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1])
