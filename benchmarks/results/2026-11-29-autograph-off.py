"""AutoGraph off (`tracing.graph_function`): another checkout's export (before) against this
one's (after), the same model and flags, each export a process of its own, alternated
`ROUNDS` times: the wall clock of the export command, the graph's op types and counts, and
`serving_default`'s translations and scores of the bundled test split.

    git worktree add /tmp/before 232e16e
    python benchmarks/results/2026-11-29-autograph-off.py RUN /tmp/before OUT ROUNDS [FLAGS...]

FLAGS go to both exports (e.g. --guided, --jit-compile).
"""

import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[2]
TEST = HERE / "keras_transformer/data/sample/en_de.test.tsv.gz"
TRANSLATE = """
import gzip, json, tensorflow as tf, tensorflow_text  # noqa
lines = gzip.open({test!r}, "rt", encoding="utf-8").read().splitlines()
rows = [line.split("\\t")[0] for line in lines]
serve = tf.saved_model.load({d!r}).signatures["serving_default"]
texts, scores = [], []
for i in range(0, len(rows), 64):
    out = serve(text=tf.constant(rows[i:i + 64]))
    texts += [t.decode() for t in out["translations"].numpy()]
    scores += out["scores"].numpy().tolist()
json.dump({{"texts": texts, "scores": scores}}, open({out!r}, "w"))
"""


def export(root: Path, run: str, base: Path, flags: list[str]) -> tuple[Path, float]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(root))
    command = [sys.executable, "-m", "keras_transformer.cli.export", "--model-dir", run,
               "--export-base", str(base), *flags]  # fmt: skip
    start = time.perf_counter()
    result = subprocess.run(command, cwd=root, env=env, check=True, capture_output=True, text=True)
    return Path(result.stdout.strip().splitlines()[0]), time.perf_counter() - start


def op_counts(export_dir: Path) -> collections.Counter:
    from keras_transformer.serving.op_check import read_saved_model

    graph = read_saved_model(str(export_dir)).meta_graphs[0].graph_def
    counts = collections.Counter(node.op for node in graph.node)
    for function in graph.library.function:
        counts.update(node.op for node in function.node_def)
    return counts


def main(run: str, before: str, out: str, rounds: int, flags: list[str]) -> None:
    roots = {"before": Path(before).resolve(), "after": HERE}
    seconds = {name: [] for name in roots}
    dirs = {}
    for _ in range(rounds):
        for name, root in roots.items():
            dirs[name], took = export(root, run, Path(out) / name, flags)
            seconds[name].append(took)
            print(f"{name}: {took:.1f} s", flush=True)
    counts = {name: op_counts(d) for name, d in dirs.items()}
    results = {}
    for name in roots:
        path = Path(out) / f"{name}.json"
        code = TRANSLATE.format(test=str(TEST), d=str(dirs[name]), out=str(path))
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(HERE))
        subprocess.run([sys.executable, "-c", code], cwd=HERE, env=env, check=True)
        results[name] = json.loads(path.read_text())
    b, a = results["before"], results["after"]
    equal = sum(x == y for x, y in zip(b["texts"], a["texts"]))
    gap = float(np.max(np.abs(np.subtract(b["scores"], a["scores"]))))
    print(f"flags: {' '.join(flags) or '(none)'}")
    for name in roots:
        nodes = sum(counts[name].values())
        print(f"{name}: export s {[round(s, 1) for s in seconds[name]]}, median "
              f"{np.median(seconds[name]):.1f}; graph nodes {nodes}")  # fmt: skip
    ratios = [x / y for x, y in zip(seconds["before"], seconds["after"])]
    print(f"before/after by round: {[round(r, 2) for r in ratios]}")
    print(f"same op types and counts: {counts['before'] == counts['after']}")
    print(f"same translations: {equal} of {len(b['texts'])}; largest score difference {gap:.2e}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
