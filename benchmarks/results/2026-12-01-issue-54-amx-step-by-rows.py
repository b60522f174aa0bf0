"""Issue 54 on an AMX Xeon: what a beam-search step of a trained base model costs by the
rows it carries, and how many rows the steps of the batch-64 workload carry, per early stop.

    PYTHONPATH=. python benchmarks/results/2026-12-01-issue-54-amx-step-by-rows.py RUN OUT.json

1. A step's cost by rows: `decode_benchmark.forced_search` (the production per-source search,
   EOS masked out) of 1 to 64 sources of 24 random ids, beam 4 (4 to 256 rows), in float32
   and bfloat16; ms a step = (time of 40 steps - time of 8 steps) / 32, medians of 3.
2. The rows of every loop step of the `Translator` search over the 4 batches of 64 of
   `serving single --throughput 64` (bfloat16, the run's alpha), with each stop rule: a
   histogram, the steps and the row-steps. Rows are read from the logits' first dimension
   inside the search (`BeamSearch.extend`, wrapped here only).
"""

import importlib.util
import json
import pathlib
import sys
import tempfile

from keras_transformer import malloc, onednn

onednn.prefer_onednn()  # as the commands do

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import machine  # noqa: E402
from benchmarks.decode_benchmark import forced_search, median_time  # noqa: E402
from keras_transformer import SearchOptions, artifacts  # noqa: E402
from keras_transformer.decoding import Translator, beam_search  # noqa: E402

OPS = pathlib.Path(__file__).with_name("2026-12-01-issue-54-amx-batch64-ops.py")
_spec = importlib.util.spec_from_file_location("amx_batch64_ops", OPS)
batch64 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(batch64)
EDGES = [0, 8, 16, 32, 64, 128, 192, 257]


def step_ms(model, config, items: int) -> float:
    """ms a step of the forced search of `items` sources of 24 random ids, beam 4:
    (time of 40 steps - time of 8 steps) / 32, medians of 3."""
    source = tf.constant(np.random.RandomState(0).randint(4, 32000, (items, 24)), tf.int32)
    seconds = {}
    for steps in (8, 40):
        search = forced_search(model, config, 4, steps)
        seconds[steps] = median_time(lambda s=search, x=source: s(x).numpy(), 3)
    return 1e3 * (seconds[40] - seconds[8]) / 32


def ms_per_step(run: str, dtype: str) -> dict:
    model, config, _ = artifacts.load_trained(run, dtype=dtype)
    rows = {}
    for items in (1, 2, 4, 16, 32, 64):
        rows[4 * items] = step_ms(model, config, items)
        print(f"{dtype}: {4 * items} rows, {rows[4 * items]:.2f} ms a step", flush=True)
    return rows


def step_rows(run: str, lookahead: str, sources, log: str) -> list[int]:
    model, _, tokenizer = artifacts.load_trained(run, dtype="bfloat16")
    options = SearchOptions(alpha=artifacts.run_eval_alpha(run), stop_lookahead=lookahead)
    search = Translator(model, tokenizer, options).search_function(1)
    open(log, "w").close()
    for source in sources:
        search(source)
    return [int(line) for line in open(log)]


def main(run: str, out: str) -> None:
    malloc.keep_freed_memory()
    report = {"machine": machine.description(), "tensorflow": tf.__version__}
    report["ms_per_step"] = {dtype: ms_per_step(run, dtype) for dtype in ("float32", "bfloat16")}
    sources = batch64.batches(run)
    extend = beam_search.BeamSearch.extend
    with tempfile.TemporaryDirectory() as tmp:
        log = f"{tmp}/rows.txt"

        def logged(self, state, logits, length, loop):
            rows = tf.print(tf.shape(logits)[0], output_stream=f"file://{log}")
            with tf.control_dependencies([rows]):
                return extend(self, state, tf.identity(logits), length, loop)

        beam_search.BeamSearch.extend = logged
        for lookahead in ("limit", "next"):
            rows = step_rows(run, lookahead, sources, log)
            histogram = np.histogram(rows, EDGES)[0].tolist()
            report[lookahead] = {"steps": len(rows), "row_steps": sum(rows), "histogram": histogram}
            print(lookahead, report[lookahead], "edges", EDGES, flush=True)
    report["edges"] = EDGES
    with open(out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
