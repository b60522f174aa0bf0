"""XLA sampling with and without batch buckets: `Translator(..., jit_compile=True)
.sample_tensors` of another checkout (before: a compile per batch size) against this one's
(after: batches padded to a power of two, as beam search, the padding rows done before the
first step), each in a process of its own (XLA's compile cache is per process): the first
call of every batch size 1-8 (in that order), then the steady time of each batch size
(medians of `rounds` calls), greedy and top-k sampling, and whether the translations are
the same.

    git worktree add /tmp/before 6167aa3
    python benchmarks/results/2026-11-27-xla-sampling-buckets.py RUN /tmp/before
"""

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]
CHILD = """
import gzip, json, time
import numpy as np, tensorflow as tf
from keras_transformer.artifacts import load_trained
from keras_transformer.serving.export import make_translator
model, _, tokenizer = load_trained({run!r})
translator = make_translator(model, tokenizer, jit_compile=True)
lines = gzip.open({test!r}, "rt", encoding="utf-8").read().splitlines()
rows = [line.split("\\t")[0] for line in lines]
rows = [r for r in rows if 5 <= len(r.split()) <= 12][:8]
sample = tf.function(lambda t: translator.sample_tensors(t, {method!r}, top_k=8, seed=1),
                     input_signature=[tf.TensorSpec([None], tf.string)])


def timed(n):
    start = time.perf_counter()
    out = sample(tf.constant(rows[:n]))["translations"].numpy()
    return time.perf_counter() - start, [t.decode() for t in out]


first = {{n: timed(n)[0] for n in range(1, 9)}}
steady, texts = {{}}, {{}}
for n in range(1, 9):
    runs = [timed(n) for _ in range({rounds})]
    steady[n], texts[n] = float(np.median([t for t, _ in runs])), runs[0][1]
print("RESULT=" + json.dumps({{"first": first, "steady": steady, "texts": texts}}))
"""


def measure(root: Path, run: str, method: str, rounds: int) -> dict:
    test = HERE / "keras_transformer/data/sample/en_de.test.tsv.gz"
    code = CHILD.format(run=run, test=str(test), method=method, rounds=rounds)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    line = [x for x in out.splitlines() if x.startswith("RESULT=")][-1]
    return json.loads(line.removeprefix("RESULT="))


def main(run: str, before: str, rounds: int = 20) -> None:
    for method in ("greedy", "sample"):
        results = {"before": measure(Path(before).resolve(), run, method, rounds)}
        results["after"] = measure(HERE, run, method, rounds)
        b, a = results["before"], results["after"]
        print(f"\n{method} (top_k 8 for sample):\n")
        print("| batch | first call before (s) | after (s) | steady before (ms) | after (ms) | "
              "after / before | same translations |")  # fmt: skip
        print("|---:|---:|---:|---:|---:|---:|---|")
        for n in map(str, range(1, 9)):
            print(f"| {n} | {b['first'][n]:.2f} | {a['first'][n]:.2f} | "
                  f"{b['steady'][n] * 1e3:.1f} | {a['steady'][n] * 1e3:.1f} | "
                  f"{a['steady'][n] / b['steady'][n]:.2f}x | "
                  f"{'yes' if b['texts'][n] == a['texts'][n] else 'no'} |")  # fmt: skip
        for name, r in results.items():
            print(f"\n{name}: first calls of batches 1-8 together {sum(r['first'].values()):.1f} s")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(x) for x in sys.argv[3:]))
