"""The products of a decoding step under three kernel layouts, in one process: Keras'
`(in, units)`, transposed `(units, in)` (`tf.matmul(..., transpose_b=True)`, PyTorch's and
CTranslate2's layout) and padded `(in, units + 16)` (`layers.padded_dense`, the output
sliced back to `units`).

    python benchmarks/run.py decode layout --cpu-isa avx2
    python benchmarks/run.py decode layout --rows 4,32,128 --shapes 512x512,512x2048,2048x512
    python benchmarks/run.py decode layout --dtype bfloat16   # mixed_bfloat16's products

For each rows x shape, `--copies` distinct kernels (12: caches as cold as in a decoder step,
whose ~50 kernels do not fit them) are multiplied in turn inside one `tf.while_loop`, each
layout timed in alternating rounds; reports ms per product of the Keras layout and the speed
of the others relative to it (the median of each round's ratio). TensorFlow's oneDNN setting
is the process's: `TF_ENABLE_ONEDNN_OPTS=0` measures Eigen's kernels.
"""

from __future__ import annotations

import os
import statistics
import time

from benchmarks import flags, machine

LAYOUTS = ("keras", "transposed", "padded")


def parse_args(argv, prog: str | None = None):
    parser = flags.parser(prog, __doc__)
    parser.add_argument("--rows", default="4,32,128", help="rows per product, comma-separated")
    parser.add_argument(
        "--shapes", default="512x512,512x2048,2048x512,128x128,128x512,512x128",
        help="kernels IN x UNITS, comma-separated (default: base's and the quick preset's)",
    )  # fmt: skip
    parser.add_argument("--copies", type=int, default=12, help="distinct kernels cycled")
    parser.add_argument(
        "--dtype", choices=("float32", "bfloat16"), default="float32",
        help="of inputs and kernels (bfloat16: the products of the mixed_bfloat16 policy)",
    )  # fmt: skip
    flags.add(parser, repeats=5, json={"help": "write the results here"})
    parser.add_argument(
        "--cpu-isa", choices=sorted(machine.ISA_CAPS), default="native",
        help="avx2: cap oneDNN and MKL to AVX2 (a CPU without AVX-512 or bfloat16 units)",
    )  # fmt: skip
    return parser.parse_args(argv)


def _products(
    rows: int, fan_in: int, units: int, copies: int, dtype: str, budget_flops: float = 4e8
):
    """`{layout: tf.function}`, each multiplying one `(rows, fan_in)` input by `copies`
    kernels in turn (all in `dtype`), repeated to about `budget_flops`; and the products per
    call."""
    import numpy as np
    import tensorflow as tf

    from keras_transformer.layers.padded_dense import PAD

    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(rows, fan_in)).astype("float32"), dtype=dtype)
    kernels = [rng.normal(size=(fan_in, units)).astype("float32") * 0.05 for _ in range(copies)]
    weights = {
        "keras": [tf.Variable(tf.cast(k, dtype)) for k in kernels],
        "transposed": [tf.Variable(tf.cast(k.T.copy(), dtype)) for k in kernels],
        "padded": [tf.Variable(tf.cast(np.pad(k, [[0, 0], [0, PAD]]), dtype)) for k in kernels],
    }
    product = {
        "keras": lambda h, w: tf.matmul(h, w),
        "transposed": lambda h, w: tf.matmul(h, w, transpose_b=True),
        "padded": lambda h, w: tf.matmul(h, w)[:, :units],
    }
    repeats = max(2, int(budget_flops / (2 * rows * fan_in * units * copies)))

    def timed(layout):
        @tf.function
        def run():
            def body(i, total):
                h = x + tf.cast(tf.cast(i, tf.float32) * 1e-6, dtype)  # a new input each round
                out = tf.add_n([product[layout](h, w) for w in weights[layout]])
                return i + 1, total + tf.reduce_sum(tf.cast(out[:, :1], tf.float32))

            return tf.while_loop(lambda i, _: i < repeats, body, (0, 0.0))[1]

        return run

    return {layout: timed(layout) for layout in LAYOUTS}, repeats * copies


def run(args) -> dict:
    machine.cap_cpu_isa(args.cpu_isa)
    results = []
    for rows in (int(r) for r in args.rows.split(",")):
        for shape in args.shapes.split(","):
            fan_in, units = (int(n) for n in shape.split("x"))
            fns, products = _products(rows, fan_in, units, args.copies, args.dtype)
            for fn in fns.values():
                fn()  # trace
            seconds = {layout: [] for layout in LAYOUTS}
            for round_ in range(args.repeats):
                for layout in LAYOUTS if round_ % 2 == 0 else LAYOUTS[::-1]:
                    start = time.perf_counter()
                    float(fns[layout]())
                    seconds[layout].append(time.perf_counter() - start)
            keras_ms = statistics.median(seconds["keras"]) / products * 1e3
            results.append({
                "rows": rows, "shape": shape, "keras_ms": keras_ms,
                "gflops": 2 * rows * fan_in * units / keras_ms / 1e6,
                **{f"{layout}_speed": statistics.median(
                    k / s for k, s in zip(seconds["keras"], seconds[layout])
                ) for layout in LAYOUTS[1:]},
            })  # fmt: skip
            print(_row(results[-1]), flush=True)
    from benchmarks.peers import report

    return {"rows": results, **report.environment(args.prog, args.argv, "default")}


def _row(row: dict) -> str:
    return (
        f"| {row['rows']} | {row['shape']} | {row['keras_ms']:.3f} | {row['gflops']:.0f} | "
        f"{row['transposed_speed']:.2f}x | {row['padded_speed']:.2f}x |"
    )


def markdown(result: dict) -> str:
    from benchmarks.peers import report

    lines = [
        *report.header(result), "",
        "| rows | kernel in x units | Keras layout, ms a product | GF/s | transposed | padded |",
        "|---:|---|---:|---:|---:|---:|",
    ]  # fmt: skip
    return "\n".join(lines + [_row(row) for row in result["rows"]])


def main(argv, prog: str = "python benchmarks/run.py decode layout"):
    args = parse_args(argv, prog)
    args.prog, args.argv = prog, list(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    result = run(args)
    print(markdown(result))
    flags.write_json(result, args.json)
    return result
