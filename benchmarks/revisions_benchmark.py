"""The plain search (`Translator.translate_tensors` as one graph, as the export's
`serving_default`) of two source trees, e.g. the commit before a change and after it, in
alternating processes with the same settings: sentences/s and output tokens/s.

    git worktree add /tmp/before COMMIT
    python benchmarks/run.py decode revisions --model-dir runs/sample_en_de \\
        --trees /tmp/before . --rounds 3

Each process imports the package from its tree (`PYTHONPATH`), translates the bundled dev
split (its first --sentences) once to warm up, then --passes timed passes in batches of
--batch-size sentences sorted by length; processes alternate between the trees --rounds
times. The figures are medians over all timed passes of a tree, and the ratio is the second
tree's over the first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from benchmarks import flags, machine

CHILD = r"""
import gzip, json, sys, time
import numpy as np
import tensorflow as tf
from keras_transformer import SearchOptions
from keras_transformer.artifacts import load_trained
from keras_transformer.config import eval_alpha_for
from keras_transformer.data.corpus import sample_path
from keras_transformer.decoding import Translator

import keras_transformer
model_dir, dataset = sys.argv[1], sys.argv[2]
batch_size, passes, count = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
model, _, tokenizer = load_trained(model_dir)
summary = json.load(open(model_dir + "/summary.json"))
alpha = eval_alpha_for(summary.get("model", ""))
translator = Translator(model, tokenizer, SearchOptions(alpha=alpha))
with gzip.open(sample_path(dataset, "dev"), "rt", encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f]
sources = [r[0] for r in rows if len(r) >= 2 and r[0].strip() and r[1].strip()]
sources = sources[: count or None]
order = np.argsort([len(s) for s in sources], kind="stable")
starts = range(0, len(sources), batch_size)
batches = [[sources[i] for i in order[j : j + batch_size]] for j in starts]
spec = [tf.TensorSpec([None], tf.string)]
plain = tf.function(translator.translate_tensors, input_signature=spec)

def one_pass():
    start, out = time.perf_counter(), []
    for batch in batches:
        out += [t.decode() for t in plain(tf.constant(batch))["translations"].numpy()]
    return time.perf_counter() - start, out

one_pass()
for _ in range(passes):
    seconds, out = one_pass()
    tokens = int(tokenizer.tokenize(tf.constant(out)).row_lengths().numpy().sum())
    print(json.dumps({"seconds": seconds, "sentences": len(out), "tokens": tokens,
                      "outputs": out, "package": keras_transformer.__file__}))
"""


def parse_args(argv, prog=None):
    parser = flags.parser(prog, __doc__)
    flags.add(parser, model_dir={"required": True}, json=None)
    parser.add_argument("--trees", nargs=2, required=True, help="two source trees: before after")
    parser.add_argument("--dataset", default="sample_en_de", help="bundled corpus")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per search")
    parser.add_argument("--sentences", type=int, default=0, help="first dev sentences (0: all)")
    parser.add_argument("--rounds", type=int, default=3, help="processes of each tree")
    parser.add_argument("--passes", type=int, default=2, help="timed passes per process")
    return parser.parse_args(argv)


def run_tree(tree: str, args) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    command = [sys.executable, "-c", CHILD, args.model_dir, args.dataset, str(args.batch_size),
               str(args.passes), str(args.sentences)]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=os.path.abspath(tree), capture_output=True,
                          text=True, check=True)  # fmt: skip
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main(argv=None, prog=None) -> dict:
    args = parse_args(argv, prog)
    passes = {tree: [] for tree in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            passes[tree] += run_tree(tree, args)
    result = {"dataset": args.dataset, "sentences": passes[args.trees[0]][0]["sentences"],
              "batch size": args.batch_size, "rounds": args.rounds,
              "passes per process": args.passes}  # fmt: skip
    for tree, runs in passes.items():
        seconds = float(np.median([r["seconds"] for r in runs]))
        result[tree] = {
            "sentences/s": round(runs[0]["sentences"] / seconds, 2),
            "output tokens/s": round(runs[0]["tokens"] / seconds, 1),
            "pass seconds": [round(r["seconds"], 2) for r in runs],
        }
    before, after = (result[tree]["sentences/s"] for tree in args.trees)
    result["ratio after/before"] = round(after / before, 3)
    first, second = (passes[tree][0]["outputs"] for tree in args.trees)
    result["equal outputs"] = sum(a == b for a, b in zip(first, second)) / len(first)
    result["packages"] = [passes[tree][0]["package"] for tree in args.trees]
    result["machine"] = machine.description()
    flags.write_json(result, args.json)
    print(json.dumps(result, indent=1))
    return result
