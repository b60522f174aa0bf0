"""Recipe study for the CPU quick-start run: train named variants of `pipelines/train_wmt.py`
one after another and tabulate steps, speed, dev loss/accuracy, test BLEU/chrF and cost.

    python benchmarks/run.py recipe --list
    python benchmarks/run.py recipe --variants s_post_lr05,s_pre_lr1

Each variant runs `python pipelines/train_wmt.py --model-dir RUNS/<name> --export-dir none
<flags>` as a child process and reads `RUNS/<name>/summary.json`. Wall time is noisy on a
shared machine, so the child's CPU time is recorded too: in all (`os.wait4`) and for the
training loop alone (the child's utime + stime from /proc between its "Training ..." and
"Averaged ..." log lines). Rows are merged into `OUTPUT_DIR/recipe_study.{json,md}`, so the
study can run in several sittings; a variant whose summary exists is not retrained unless
--rerun is given.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time

from benchmarks import flags

# "s_": screening run, 600 steps, BLEU on the first 200 test pairs; "t_": throughput only;
# "f_": full budget, whole test split. None: the README's command exactly (no flags, model dir
# runs/sample_en_de, deleted first, SavedModel export included).
SCREEN = "--train-steps 600 --eval-limit 200"
K = "--train-steps 1000 --eval-limit 0 --vocab runs/sample_en_de/spm.model"
PRE = "--config tiny --norm-position pre --dropout 0"
VARIANTS = {
    "s_tiny_default": f"--config tiny {SCREEN}",
    "s_post_lr05": f"--config tiny --dropout 0 --learning-rate-scale 0.5 {SCREEN}",
    "s_pre_lr1": f"{PRE} {SCREEN}",
    "s_pre_lr2": f"{PRE} --learning-rate-scale 2 {SCREEN}",
    "s_pre_drop01": f"--config tiny --norm-position pre {SCREEN}",
    "s_pre_ls0": f"{PRE} --label-smoothing 0 {SCREEN}",
    "s_pre_warm200": f"{PRE} --warmup-steps 200 {SCREEN}",
    "s_pre_d256": f"{PRE} --d-model 256 --d-ff 1024 {SCREEN}",
    "s_pre_v8000": f"{PRE} --vocab-size 8000 {SCREEN}",
    "s_pre_v2000": f"{PRE} --vocab-size 2000 {SCREEN}",
    "s_pre_b3072": f"{PRE} --batch-tokens 3072 --train-steps 300 --warmup-steps 200 "
    "--eval-limit 200",
    "s_pre_len64": f"{PRE} --max-length 64 {SCREEN}",
    # "k_": 1000-step screening of the quick default's learning rate, warm-up, batch and
    # vocabulary (dev BLEU at 500 and 1000 steps; compare with f_default's dev_bleu at 1000)
    "k_warm200": f"{K} --warmup-steps 200",
    "k_lr07": f"{K} --learning-rate-scale 0.7",
    "k_b1024": f"{K} --batch-tokens 1024 --train-steps 1500 --eval-every-steps 750 "
    "--steps-per-epoch 750",
    # the full budget with 1024-token batches (k_b1024's winner at equal tokens)
    "f_b1024_2400": "--batch-tokens 1024 --train-steps 2400 --keep-checkpoints 10 "
    "--eval-every-steps 400 --steps-per-epoch 400",
    "k_v2000": "--train-steps 1000 --eval-limit 0 --vocab-size 2000",
    # a linear learning-rate cool-down to zero instead of (or before) checkpoint averaging:
    # 1400 steps fit ten minutes of training on the 2-core VM, 2000 is the default's budget
    "f_cd1400": "--train-steps 1400 --cooldown-steps 500",
    "f_cd2000": "--cooldown-steps 600",
    "f_v2000": "--vocab-size 2000",
    # the full budget at 0.7x the learning rate, and without label smoothing (AMX Xeon, bf16)
    "f_lr07": "--learning-rate-scale 0.7",
    "f_ls0": "--label-smoothing 0",
    "t_tiny_fp32": "--config tiny --train-steps 200 --eval-limit 0",
    "t_tiny_xla": "--config tiny --train-steps 200 --eval-limit 0 --jit-compile",
    "t_tiny_bf16": "--config tiny --train-steps 200 --eval-limit 0 --mixed-precision "
    "mixed_bfloat16",
    "f_default": None,
    # python benchmarks/run.py corpus toy first:
    "f_toy": "--dataset tsv:runs/toy/toy.train.tsv",
    "s_toy_800": "--dataset tsv:runs/toy/toy.train.tsv --train-steps 800",
}
COLUMNS = (
    ("variant", "variant"),
    ("flags", "flags"),
    ("steps", "steps"),
    ("target tokens/s", "tokens_per_sec"),
    ("dev loss", "dev_loss"),
    ("dev acc", "dev_accuracy"),
    ("dev BLEU", "dev_bleu"),
    ("test BLEU", "bleu"),
    ("chrF", "chrf"),
    ("train s", "train_seconds"),
    ("train CPU s", "train_cpu_seconds"),
    ("CPU s/step", "cpu_seconds_per_step"),
    ("run wall s", "wall_seconds"),
    ("run CPU s", "cpu_seconds"),
    ("load avg", "load_average_at_start"),
)


def _proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (all its threads) from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_variant(name: str, flags: str | None, runs_dir: str, log_dir: str) -> dict:
    """Train one variant in a child process; returns its row of the study."""
    command = [sys.executable, "pipelines/train_wmt.py"]
    if flags is None:
        model_dir = "runs/sample_en_de"  # the default of train_wmt.py
    else:
        model_dir = os.path.join(runs_dir, name)
        command += ["--model-dir", model_dir, "--export-dir", "none", *shlex.split(flags)]
    shutil.rmtree(model_dir, ignore_errors=True)  # a leftover run would be resumed
    marks: dict[str, float] = {}
    started = time.perf_counter()
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, f"{name}.log"), "w") as log:
        child = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        for line in child.stdout:
            log.write(line)
            for mark, text in (("train_start", "INFO Training "), ("train_end", "INFO Averaged")):
                if text in line and mark not in marks:
                    marks[mark] = _proc_cpu_seconds(child.pid)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{name} failed; see {log.name}")
    with open(os.path.join(model_dir, "summary.json")) as f:
        summary = json.load(f)
    cpu = usage.ru_utime + usage.ru_stime
    train_cpu = marks.get("train_end", cpu) - marks.get("train_start", 0.0)
    return row_from_summary(name, flags or "(none)", summary, wall, cpu, train_cpu)


def row_from_summary(name, flags, summary, wall, cpu, train_cpu) -> dict:
    history = summary.get("history", {})
    test = summary.get("test") or {}
    trained = max(summary["steps"] - summary.get("resumed_from_step", 0), 1)
    last = lambda key: round(history[key][-1], 4) if history.get(key) else None  # noqa: E731
    return {
        "variant": name,
        "flags": flags,
        "steps": summary["steps"],
        "parameters": summary.get("parameters"),
        "tokens_per_sec": summary.get("tokens_per_sec"),
        "dev_loss": last("val_loss"),
        "dev_accuracy": last("val_accuracy"),
        # greedy, the first 200 dev pairs, at the last evaluation (--eval-every-steps)
        "dev_bleu": summary["dev_bleu"][-1]["bleu"] if summary.get("dev_bleu") else None,
        "bleu": round(test["bleu"], 2) if "bleu" in test else None,
        "chrf": round(test["chrf"], 2) if "chrf" in test else None,
        "train_seconds": summary["train_seconds"],
        "train_cpu_seconds": round(train_cpu, 1),
        "cpu_seconds_per_step": round(train_cpu / trained, 3),
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "cpu_per_wall_in_training": round(train_cpu / max(summary["train_seconds"], 1e-9), 2),
        "load_average_at_start": None,
        "history": history,
        "test": test,
    }


def write_results(rows: dict[str, dict], output_dir: str) -> None:
    os.makedirs(output_dir, exist_ok=True)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    with open(os.path.join(output_dir, "recipe_study.json"), "w") as f:
        json.dump({"machine": machine, "python": platform.python_version(), "rows": rows}, f,
                  indent=1)  # fmt: skip
    lines = ["| " + " | ".join(title for title, _ in COLUMNS) + " |"]
    lines.append("| --- | --- | " + " | ".join("---:" for _ in COLUMNS[2:]) + " |")
    for row in rows.values():
        cells = ["" if row.get(key) is None else str(row[key]) for _, key in COLUMNS]
        cells[1] = f"`{cells[1]}`"
        lines.append("| " + " | ".join(cells) + " |")
    with open(os.path.join(output_dir, "recipe_study.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def load_rows(output_dir: str) -> dict[str, dict]:
    path = os.path.join(output_dir, "recipe_study.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)["rows"]


def main(argv=None, prog: str = "python benchmarks/run.py recipe study") -> None:
    parser = flags.parser(prog, __doc__)
    parser.add_argument("--variants", default="", help="comma-separated variant names to run")
    flags.add(
        parser, list={"help": "print the variants and exit"}, extra={},
        runs_dir={"default": "runs/study", "help": "model dirs of the variants"},
        output_dir=flags.RESULTS_DIR, rerun=False,
    )  # fmt: skip
    args = parser.parse_args(argv)
    variants = dict(VARIANTS)
    variants.update(dict(extra.split("=", 1) for extra in args.extra))
    if args.list:
        for name, row in variants.items():
            print(f"{name:16s} {'(no flags: the README command)' if row is None else row}")
        return
    rows = load_rows(args.output_dir)
    names = [n for n in args.variants.split(",") if n] + [e.split("=")[0] for e in args.extra]
    for name in dict.fromkeys(names):
        if name not in variants:
            raise ValueError(f"Unknown variant. Received: {name!r}; see --list")
        if name in rows and not args.rerun:
            print(f"{name}: already in the table (--rerun to train again)")
            continue
        load = os.getloadavg()[0]
        row = run_variant(name, variants[name], args.runs_dir, os.path.join(args.runs_dir, "logs"))
        row["load_average_at_start"] = round(load, 2)
        rows[name] = row
        write_results(rows, args.output_dir)
        print(json.dumps({k: row[k] for k in ("variant", "steps", "bleu", "chrf", "cpu_seconds")}))
