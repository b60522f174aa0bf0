"""The quick preset's recipe under a fixed time budget (issue 38): each row trains the default
command with one change for the number of steps that fits the budget on this machine, then
scores its checkpoints averaged over several windows on the whole dev split (beam 4, the
quick preset's alpha) and the chosen window on the test split.

    python benchmarks/run.py recipe budget --list
    python benchmarks/run.py recipe budget --rows linear,cosine --steps 3300
    python benchmarks/run.py recipe budget --table            # rewrite the table from the JSON

Rows run `python pipelines/train_wmt.py --model-dir RUNS/NAME --export-dir none --eval-limit 0
--train-steps N --keep-checkpoints 10 FLAGS` one after another (same seed, same data order).
`N` is the row's budget in steps: `--steps` (the default model's planned steps on this
machine, from its plan.json) times the row's step-time ratio (`STEP_COST`, measured apart for
rows that change the model, vocabulary or batch). A fixed step count makes a row's result
independent of machine load: only its wall time changes. Rows are merged into
`OUTPUT_DIR/budget_study.{json,md}`; a row already there is skipped unless --rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time

from benchmarks import flags

WINDOWS = (1, 3, 5, 10)  # checkpoints averaged (100 steps apart)
# name -> (flags, what it tests)
ROWS = {
    "rsqrt": ("--decay rsqrt", "paper's inverse square root, cut at the budget (before)"),
    "rsqrt_cooldown": ("--decay rsqrt_cooldown", "rsqrt + linear cool-down, last 20%"),
    "linear": ("--decay linear", "linear to zero at the planned end"),
    "cosine": ("--decay cosine", "cosine to zero at the planned end"),
}


def _finished(model_dir: str, steps: int) -> bool:
    """Whether `model_dir` holds a finished training of `steps` steps (kept, not retrained)."""
    summary = os.path.join(model_dir, "summary.json")
    return os.path.exists(summary) and json.load(open(summary))["steps"] == steps


def _train(name: str, flags: str, steps: int, runs_dir: str) -> tuple[str, float]:
    model_dir = os.path.join(runs_dir, name)
    if _finished(model_dir, steps):
        return model_dir, float("nan")
    shutil.rmtree(model_dir, ignore_errors=True)
    command = [
        sys.executable, "pipelines/train_wmt.py", "--model-dir", model_dir, "--export-dir",
        "none", "--eval-limit", "0", "--train-steps", str(steps), "--keep-checkpoints", "10",
        "--train-minutes", "0",
        *shlex.split(flags),
    ]  # fmt: skip
    started = time.perf_counter()
    with open(os.path.join(runs_dir, f"{name}.log"), "w") as log:
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True)
    return model_dir, time.perf_counter() - started


def evaluate_windows(model_dir: str, windows=WINDOWS, test_window: int | None = None) -> dict:
    """Dev BLEU (whole dev split, beam 4, the run's alpha) of the last k checkpoints averaged,
    for each k; test BLEU of the best window (or `test_window`); and with `best.weights.h5`
    (a --keep-best row), its step and dev and test BLEU."""
    from keras_transformer import artifacts
    from keras_transformer.config import TrainingConfig
    from keras_transformer.data import corpus
    from keras_transformer.decoding.dev_evaluation import BEST_WEIGHTS, best_record, load_history
    from keras_transformer.decoding.evaluation import evaluate_bleu
    from keras_transformer.training.checkpoints import average_checkpoints

    run = TrainingConfig.from_flat(**artifacts.load_run_config(model_dir))
    model, _, tokenizer = artifacts.load_trained(model_dir)
    found = artifacts.list_checkpoints(artifacts.path(model_dir, artifacts.CHECKPOINT_DIR))
    dev = list(corpus.read_split(run.data, "dev"))
    test = list(corpus.read_split(run.data, "test"))
    search = run.eval_search()
    result = {"dev": {}, "test": {}}
    for k in windows:
        average_checkpoints(model, [path for _, path in found[-k:]])
        scores = evaluate_bleu(model, tokenizer, dev, search, progress=False)
        result["dev"][k] = round(scores["bleu"], 2)
    best = test_window or max(result["dev"], key=lambda k: (result["dev"][k], -k))
    average_checkpoints(model, [path for _, path in found[-best:]])
    scores = evaluate_bleu(model, tokenizer, test, search, progress=False)
    result["test"] = {"window": best, "bleu": round(scores["bleu"], 2),
                      "chrf": round(scores["chrf"], 2)}  # fmt: skip
    best_path = artifacts.path(model_dir, BEST_WEIGHTS)
    if os.path.exists(best_path):  # a --keep-best row: its best dev-BLEU weights, scored alike
        model.load_weights(best_path)
        record = best_record(load_history(model_dir))
        dev_bleu, test_scores = (
            evaluate_bleu(model, tokenizer, split, search, progress=False) for split in (dev, test)
        )
        result["best"] = {"step": record["step"], "dev": round(dev_bleu["bleu"], 2),
                          "test": round(test_scores["bleu"], 2)}  # fmt: skip
        result["auto"] = replay_auto(model, tokenizer, model_dir, run, test)
    return result


def replay_auto(model, tokenizer, model_dir: str, run, test) -> dict:
    """What `--deliver auto` chooses for this run (`Runner.final_weights`: the averaged and
    the best weights decoded on the held-out dev pairs, a paired bootstrap) and the test BLEU
    of the averaged weights and of the choice, decoded with `model` (its weights replaced)."""
    from keras_transformer import artifacts
    from keras_transformer.config import TrainingConfig
    from keras_transformer.decoding.evaluation import evaluate_bleu
    from keras_transformer.runner import Runner

    auto = TrainingConfig.from_flat(**{**run.to_flat(), "keep_best": False, "deliver": "auto"})
    chosen, choice = Runner(auto, export_dir="none").final_weights()
    averaged_path = artifacts.path(model_dir, artifacts.FINAL_WEIGHTS)
    scores = {}
    for path in dict.fromkeys([averaged_path, chosen]):  # one decode when the averaged win
        model.load_weights(path)
        scores[path] = evaluate_bleu(model, tokenizer, test, run.eval_search(), progress=False)
    return {**choice, "averaged_test": round(scores[averaged_path]["bleu"], 2),
            "test": round(scores[chosen]["bleu"], 2)}  # fmt: skip


def run_row(name: str, flags: str, steps: int, runs_dir: str) -> dict:
    model_dir, wall = _train(name, flags, steps, runs_dir)
    runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py")
    evaluation = subprocess.run(
        [sys.executable, runner, "recipe", "budget", "--evaluate", model_dir], check=True,
        capture_output=True, text=True,
    ).stdout.strip().splitlines()[-1]  # fmt: skip
    with open(os.path.join(model_dir, "summary.json")) as f:
        summary = json.load(f)
    history = summary.get("history", {})
    return {
        "row": name, "flags": flags, "steps": summary["steps"],
        "train_seconds": summary["train_seconds"], "wall_seconds": round(wall, 1),
        "step_seconds": summary.get("step_seconds"),
        "dev_loss": round(history["val_loss"][-1], 4) if history.get("val_loss") else None,
        "dev_bleu_curve": [(r["step"], r["bleu"]) for r in summary.get("dev_bleu", [])],
        **json.loads(evaluation),
    }  # fmt: skip


def markdown(rows: dict) -> str:
    lines = [
        "| row | flags | steps | dev BLEU by window " + "/".join(map(str, WINDOWS))
        + " | best window | test BLEU | chrF | best dev-BLEU weights: step, dev / test"
        + " | dev loss | train s |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: |",
    ]  # fmt: skip
    for row in rows.values():
        dev = " / ".join(f"{row['dev'][str(k)]:.2f}" for k in WINDOWS if str(k) in row["dev"])
        best = row.get("best")
        best = f"{best['step']}, {best['dev']:.2f} / {best['test']:.2f}" if best else "-"
        lines.append(
            f"| {row['row']} | `{row['flags']}` | {row['steps']} | {dev} | "
            f"{row['test']['window']} | {row['test']['bleu']:.2f} | {row['test']['chrf']:.2f} | "
            f"{best} | {row['dev_loss']} | {row['train_seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None, prog: str = "python benchmarks/run.py recipe budget") -> None:
    parser = flags.parser(prog, __doc__)
    parser.add_argument("--rows", default="", help="comma-separated row names")
    flags.add(parser, extra={})
    flags.add(parser, steps={"help": "the budget in steps of the default model"})
    parser.add_argument("--step-cost", action="append", default=[], metavar="NAME=RATIO",
                        help="a row's step time over the default's (measured apart)")  # fmt: skip
    flags.add(parser, list=False)
    parser.add_argument("--table", action="store_true", help="rewrite the table and exit")
    parser.add_argument("--evaluate", help=argparse.SUPPRESS)  # child: one model dir
    flags.add(parser, runs_dir="runs/budget", output_dir=flags.RESULTS_DIR, rerun=False)
    args = parser.parse_args(argv)
    if args.evaluate:
        print(json.dumps(evaluate_windows(args.evaluate)))
        return
    rows_spec = {name: row for name, (row, _) in ROWS.items()}
    rows_spec.update(dict(extra.split("=", 1) for extra in args.extra))
    if args.list:
        for name, (row, what) in ROWS.items():
            print(f"{name:16s} {row:40s} {what}")
        return
    path = os.path.join(args.output_dir, "budget_study.json")
    stored = json.load(open(path)) if os.path.exists(path) else {"rows": {}}
    rows = stored["rows"]
    costs = {k: float(v) for k, v in (c.split("=", 1) for c in args.step_cost)}
    os.makedirs(args.runs_dir, exist_ok=True)
    os.makedirs(args.output_dir, exist_ok=True)
    names = [n for n in args.rows.split(",") if n] + [e.split("=")[0] for e in args.extra]
    for name in dict.fromkeys(names):
        if name in rows and not args.rerun:
            print(f"{name}: already in the table")
            continue
        steps = round(args.steps / costs.get(name, 1.0))
        rows[name] = run_row(name, rows_spec[name], steps, args.runs_dir)
        stored.update(machine=f"{platform.processor() or platform.machine()}, "
                      f"{os.cpu_count()} cores", python=platform.python_version())  # fmt: skip
        with open(path, "w") as f:
            json.dump(stored, f, indent=1)
        print(json.dumps({k: rows[name][k] for k in ("row", "steps", "dev", "test")}), flush=True)
    with open(os.path.join(args.output_dir, "budget_study.md"), "w") as f:
        f.write(markdown(rows))
