"""The export's graph stored once: another checkout's export (before) against this one's
(after), the same model and flags: saved_model.pb's size and functions, the time to export,
to load (TF2 `tf.saved_model.load`, and the TF1 loader TF Serving's C++ side follows, each
in a fresh process, alternated), and `serving_default`'s translations of the test split.

    git worktree add /tmp/before 6167aa3
    python benchmarks/results/2026-11-27-export-graph-once.py RUN /tmp/before OUT [FLAGS...]

FLAGS go to both exports (e.g. --guided, --jit-compile).
"""

import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[2]
TEST = HERE / "keras_transformer/data/sample/en_de.test.tsv.gz"
LOAD_TF2 = """
import time, tensorflow as tf, tensorflow_text  # noqa
start = time.perf_counter(); tf.saved_model.load({d!r}); print(time.perf_counter() - start)
"""
LOAD_TF1 = """
import time, tensorflow as tf, tensorflow_text  # noqa
start = time.perf_counter()
with tf.compat.v1.Session(graph=tf.Graph()) as session:
    tf.compat.v1.saved_model.loader.load(session, ["serve"], {d!r})
print(time.perf_counter() - start)
"""
TRANSLATE = """
import gzip, sys, tensorflow as tf, tensorflow_text  # noqa
lines = gzip.open({test!r}, "rt", encoding="utf-8").read().splitlines()
rows = [line.split("\\t")[0] for line in lines]
serve = tf.saved_model.load({d!r}).signatures["serving_default"]
out = []
for i in range(0, len(rows), 64):
    out += [t.decode() for t in serve(text=tf.constant(rows[i:i + 64]))["translations"].numpy()]
open({out!r}, "w", encoding="utf-8").write("\\n".join(out) + "\\n")
"""


def python(code: str, cwd: Path) -> str:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(cwd))
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, check=True,
                            capture_output=True, text=True)  # fmt: skip
    return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""


def export(root: Path, run: str, base: Path, flags: list[str]) -> tuple[Path, float]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(root))
    command = [sys.executable, "-m", "keras_transformer.cli.export", "--model-dir", run,
               "--export-base", str(base), "--version", "1", *flags]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, cwd=root, env=env, check=True, capture_output=True)
    return base / "transformer" / "1", time.perf_counter() - start


def functions(export_dir: Path) -> int:
    from keras_transformer.serving.op_check import read_saved_model

    return len(read_saved_model(str(export_dir)).meta_graphs[0].graph_def.library.function)


def main(run: str, before: str, out: str, flags: list[str], rounds: int = 3) -> None:
    roots = {"before": Path(before).resolve(), "after": HERE}
    dirs, rows = {}, {}
    for name, root in roots.items():
        dirs[name], seconds = export(root, run, Path(out) / name, flags)
        size = (dirs[name] / "saved_model.pb").stat().st_size
        rows[name] = {"export_s": seconds, "pb_mb": size / 1e6, "functions": functions(dirs[name])}
        rows[name].update(tf2=[], tf1=[])
    for _ in range(rounds):
        for name in roots:
            for key, code in (("tf2", LOAD_TF2), ("tf1", LOAD_TF1)):
                rows[name][key].append(float(python(code.format(d=str(dirs[name])), HERE)))
    texts = {}
    for name in roots:
        path = Path(out) / f"{name}.txt"
        python(TRANSLATE.format(test=str(TEST), d=str(dirs[name]), out=str(path)), HERE)
        texts[name] = path.read_text(encoding="utf-8").splitlines()
    lines = len(gzip.open(TEST, "rt", encoding="utf-8").read().splitlines())
    equal = sum(a == b for a, b in zip(texts["before"], texts["after"]))
    print(f"flags: {' '.join(flags) or '(none)'}")
    print("| export | saved_model.pb (MB) | functions | export (s) | TF2 load (s) | TF1 load (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        print(f"| {name} | {row['pb_mb']:.1f} | {row['functions']} | {row['export_s']:.1f} | "
              f"{np.median(row['tf2']):.2f} | {np.median(row['tf1']):.2f} |")  # fmt: skip
    b, a = rows["before"], rows["after"]
    print(f"before/after: pb {b['pb_mb'] / a['pb_mb']:.2f}x, export "
          f"{b['export_s'] / a['export_s']:.2f}x, TF2 load "
          f"{np.median(b['tf2']) / np.median(a['tf2']):.2f}x, TF1 load "
          f"{np.median(b['tf1']) / np.median(a['tf1']):.2f}x")  # fmt: skip
    print(f"same translations: {equal} of {lines} (lines: {len(texts['before'])}, "
          f"{len(texts['after'])})")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
