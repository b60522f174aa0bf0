"""Where a base beam-search step's time goes, op by op: decode_benchmark's forced search
(`benchmarks/peers/ours.make_decode`: base, random weights, vocabulary 32000, 32 sources of 32
tokens, beam 4, exactly 32 output tokens), one search under TensorFlow's profiler, the ops'
self-times summed by op type and by what they do.

    PYTHONPATH=. python benchmarks/results/2026-11-29-avx2-step-ops.py OUT.json [ROUNDS]

Prints the unprofiled wall time (median of ROUNDS, default 3), the profiled one, and the
tables; writes them to OUT.json. Self-times of ops that ran at the same time on the two
inter-op threads both count, so the shares are of the ops' summed self-time, not of the wall.
"""

import collections
import dataclasses
import glob
import json
import sys
import tempfile
import time

from keras_transformer import onednn

onednn.prefer_onednn()  # as the commands do

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin  # noqa: E402

from benchmarks import machine  # noqa: E402
from benchmarks.peers import ours  # noqa: E402
from benchmarks.peers.spec import Spec  # noqa: E402

# What an op does, from its type and name (first match wins).
ROLES = [
    ("encoder (once per search)", lambda t, n: "while/" not in n),
    ("output projection (vocabulary)", lambda t, n: "token_embedding" in n or "output_kernel" in n),
    ("log-softmax", lambda t, n: t == "LogSoftmax"),
    ("top-k and selection", lambda t, n: t in {"TopKV2", "Max", "GatherV2", "Sort"}),
    ("attention products", lambda t, n: "BatchMatMul" in t),
    ("projections and FFN", lambda t, n: "MatMul" in t),
    ("attention softmax", lambda t, n: "Softmax" in t),
    ("cache writes", lambda t, n: t in {"ConcatV2", "TensorScatterUpdate", "DynamicUpdateSlice"}),
    ("layer norms", lambda t, n: "norm" in n),
]


def role(op_type: str, name: str) -> str:
    return next((r for r, match in ROLES if match(op_type, name)), "other element-wise and glue")


def profile(run) -> tuple[float, list[dict]]:
    """(wall seconds of one `run()` under the profiler, its ops' rows but idle time)."""
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        start = time.perf_counter()
        run()
        wall = time.perf_counter() - start
        tf.profiler.experimental.stop()
        paths = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
        data, ok = plugin.xspace_to_tools_data(paths, "framework_op_stats", {})
    assert ok, data
    table = json.loads(data)[0]
    ids = [c["id"] for c in table["cols"]]
    rows = [dict(zip(ids, [c["v"] for c in r["c"]])) for r in table["rows"]]
    return wall, [r for r in rows if r["type"] != "IDLE"]


def summed(rows, key) -> list[tuple[str, float, int]]:
    total = collections.Counter()
    count = collections.Counter()
    for r in rows:
        total[key(r)] += r["total_self_time"] / 1e3  # us -> ms
        count[key(r)] += int(r["occurrences"])
    return [(k, ms, count[k]) for k, ms in total.most_common()]


def main(out: str, rounds: int) -> None:
    spec = Spec()
    model = ours.build_model(spec)
    run, _ = ours.make_decode(spec, model)
    run()  # trace
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    wall, rows = profile(run)
    ops_ms = sum(r["total_self_time"] for r in rows) / 1e3
    report = {
        "machine": machine.description(),
        "tensorflow": tf.__version__,
        "onednn": onednn.onednn_enabled(),
        "spec": dataclasses.asdict(spec),
        "wall_s": times,
        "wall_median_s": float(np.median(times)),
        "profiled_wall_s": wall,
        "ops_self_ms": ops_ms,
        "by_role": summed(rows, lambda r: role(r["type"], r["operation"])),
        "by_type": summed(rows, lambda r: r["type"]),
        "top_ops": [(r["operation"], r["type"], r["total_self_time"] / 1e3) for r in rows[:25]],
    }
    steps = spec.out_length
    print(f"{report['machine']}; TF {tf.__version__}, oneDNN {report['onednn']}")
    print(f"wall {report['wall_median_s']:.3f} s (median of {rounds}: {times}), profiled "
          f"{wall:.3f} s; ops' summed self-time {ops_ms / 1e3:.3f} s")  # fmt: skip
    for title, table in (("by role", report["by_role"]), ("by op type", report["by_type"][:20])):
        print(f"\n| {title} | self ms | per step ms | share |\n|---|---:|---:|---:|")
        for name, ms, _ in table:
            print(f"| {name} | {ms:.0f} | {ms / steps:.2f} | {ms / ops_ms:.1%} |")
    with open(out, "w") as f:
        json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
