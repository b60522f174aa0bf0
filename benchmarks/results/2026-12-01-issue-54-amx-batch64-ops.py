"""Issue 54 on an AMX Xeon: where the default export's search of a batch of 64 goes, op by
op, in float32 and bfloat16, with a trained model (real early stops, not a forced length).

    PYTHONPATH=. python benchmarks/results/2026-12-01-issue-54-amx-batch64-ops.py RUN OUT.json \
        [LOOKAHEAD]

The first 256 test lines of one sentence (as `serving single --throughput 64`) in 4 batches
of 64, file order; the `Translator`'s search function (ids in, ids out: the numeric core of
`serving_default`) with the run's alpha and `LOOKAHEAD` (default `limit`). For each dtype: the
unprofiled wall of the 4 batches (median of 3), then one pass under TensorFlow's profiler,
the ops' self-times summed by what they do (the roles of 2026-11-29-avx2-step-ops.py, which
this script imports) and by op type. Self-times of ops that ran at once on the two inter-op
threads both count: shares are of the summed self-time, not of the wall.
"""

import importlib.util
import json
import pathlib
import sys
import time

from keras_transformer import malloc, onednn

onednn.prefer_onednn()  # as the commands do

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import machine  # noqa: E402
from benchmarks.latency_benchmark import one_sentence_lines  # noqa: E402
from keras_transformer import SearchOptions, artifacts  # noqa: E402
from keras_transformer.data.corpus import read_pairs  # noqa: E402
from keras_transformer.data.tokenizer import SubwordTokenizer  # noqa: E402
from keras_transformer.decoding import Translator  # noqa: E402

OPS = pathlib.Path(__file__).with_name("2026-11-29-avx2-step-ops.py")
_spec = importlib.util.spec_from_file_location("avx2_step_ops", OPS)
step_ops = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(step_ops)


def batches(run: str) -> list[tf.Tensor]:
    """The 4 batches of 64 source ids `(64, width)` of the throughput workload."""
    tokenizer = SubwordTokenizer.from_file(artifacts.path(run, artifacts.TOKENIZER_FILE))
    texts = one_sentence_lines([s for s, _ in read_pairs("sample_en_de", "test")])[:256]
    config = artifacts.load_config(run)
    return [
        tokenizer.encode_source(tf.constant(texts[i : i + 64]), config.max_length).to_tensor()
        for i in range(0, 256, 64)
    ]


def measure(run: str, dtype: str, lookahead: str, sources) -> dict:
    model, _, tokenizer = artifacts.load_trained(run, dtype=dtype)
    options = SearchOptions(alpha=artifacts.run_eval_alpha(run), stop_lookahead=lookahead)
    search = Translator(model, tokenizer, options).search_function(1)

    def once():
        return [int(search(s)[0].shape[-1]) - 1 for s in sources]  # loop steps a batch

    steps = once()  # traces
    times = []
    for _ in range(3):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    wall, rows = step_ops.profile(once)
    ops_ms = sum(r["total_self_time"] for r in rows) / 1e3
    return {
        "dtype": dtype,
        "loop_steps": steps,
        "wall_s": times,
        "wall_median_s": float(np.median(times)),
        "profiled_wall_s": wall,
        "ops_self_ms": ops_ms,
        "by_role": step_ops.summed(rows, lambda r: step_ops.role(r["type"], r["operation"])),
        "by_type": step_ops.summed(rows, lambda r: r["type"])[:25],
    }


def main(run: str, out: str, lookahead: str) -> None:
    malloc.keep_freed_memory()
    sources = batches(run)
    report = {
        "machine": machine.description(),
        "tensorflow": tf.__version__,
        "onednn": onednn.onednn_enabled(),
        "lookahead": lookahead,
        "widths": [int(s.shape[1]) for s in sources],
        "results": [measure(run, dtype, lookahead, sources) for dtype in ("float32", "bfloat16")],
    }
    print(f"{report['machine']}; TF {tf.__version__}, oneDNN {report['onednn']}; {lookahead}")
    for r in report["results"]:
        steps = sum(r["loop_steps"])
        print(f"\n{r['dtype']}: 4 batches {r['wall_median_s']:.3f} s (median of "
              f"{r['wall_s']}), loop steps {r['loop_steps']}, ops' summed self-time "
              f"{r['ops_self_ms']:.0f} ms")  # fmt: skip
        for title, table in (("by role", r["by_role"]), ("by op type", r["by_type"][:15])):
            print(f"\n| {title} | self ms | per loop step ms | share |\n|---|---:|---:|---:|")
            for name, ms, _ in table:
                print(f"| {name} | {ms:.0f} | {ms / steps:.2f} | {ms / r['ops_self_ms']:.1%} |")
    with open(out, "w") as f:
        json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "limit")
