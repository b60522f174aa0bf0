"""Start to first step of a resumed training run on prepared shards, early and late in the
run: the seek's cost does not grow with the step (issue 51).

    python benchmarks/run.py profile resume_start --resume-at 10 10000 --repeats 2

The bundled `sample_en_de` is prepared in shards of `--examples-per-shard` pairs (into
`--work-dir`, with a vocabulary of `--vocab-size` trained on it); a tiny model trains 10 steps
on it; its step-10 checkpoint is copied into one model directory per `--resume-at` step S with
the step counter (the optimizer's `iterations`, what the trainer resumes from) set to S. Each
resume (`pipelines/train_wmt.py`, a fresh process) is timed from its start to the log line of
its first step (S + 1), then stopped; the runs alternate, `--repeats` times. The figure holds
everything a resume does before its first step (imports, model build, restore, the data seek,
tracing); only the seek depends on S.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

from benchmarks import flags

STEPS = 10


def _prepare(work: str, examples_per_shard: int, vocab_size: int) -> str:
    """The bundled corpus prepared in `work` (reused if there); returns its `prepared:` spec."""
    from keras_transformer.data import corpus, prepared
    from keras_transformer.data.tokenizer import train_sentencepiece

    out = os.path.join(work, "prepared")
    if not os.path.exists(os.path.join(out, "manifest.json")):
        sides = (side for pair in corpus.read_pairs("sample_en_de", "train") for side in pair)
        spm = train_sentencepiece(sides, os.path.join(work, "spm.model"), vocab_size=vocab_size)
        prepared.prepare("sample_en_de", out, spm, examples_per_shard=examples_per_shard)
    return f"prepared:{out}"


def _with_step(source_dir: str, target_dir: str, step: int) -> None:
    """A copy of the run in `source_dir` whose only checkpoint says `step`."""
    import h5py

    from keras_transformer import artifacts
    from keras_transformer.training import checkpoints

    shutil.rmtree(target_dir, ignore_errors=True)
    shutil.copytree(source_dir, target_dir)
    directory = os.path.join(target_dir, artifacts.CHECKPOINT_DIR)
    found = artifacts.list_checkpoints(directory)
    for _, path in found[:-1]:
        os.remove(path)
    with h5py.File(found[-1][1], "a") as f:
        f["optimizer/vars/0"][()] = step  # the optimizer's iterations
        f[checkpoints.STATE_GROUP].attrs["step"] = step
    os.replace(found[-1][1], artifacts.checkpoint_path(directory, step))


def _time_to_first_step(command: list[str], step: int, timeout: float = 900) -> float:
    """Seconds from starting `command` to its log line of update `step`; then it is stopped."""
    from keras_transformer.testing.runs import ENV

    start = time.perf_counter()
    process = subprocess.Popen(
        command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        for line in process.stderr:
            if f" step {step}/" in line:
                return time.perf_counter() - start
            if time.perf_counter() - start > timeout:
                break
        raise RuntimeError(f"no step {step} within {timeout}s: {command}")
    finally:
        process.kill()
        process.wait()


def main(argv=None, prog=None) -> dict:
    parser = flags.parser(prog, __doc__)
    parser.add_argument("--resume-at", type=int, nargs="+", default=[10, 10_000])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--examples-per-shard", type=int, default=2000)
    parser.add_argument("--vocab-size", type=int, default=1000)
    parser.add_argument("--batch-tokens", type=int, default=1024)
    parser.add_argument("--work-dir", default="/tmp/resume_start")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    from keras_transformer.testing.runs import run, train_command

    os.makedirs(args.work_dir, exist_ok=True)
    dataset = _prepare(args.work_dir, args.examples_per_shard, args.vocab_size)
    common = ["--dataset", dataset, "--batch-tokens", str(args.batch_tokens), "--max-length",
              "64", "--vocab-size", str(args.vocab_size)]  # fmt: skip
    first = os.path.join(args.work_dir, "first")
    shutil.rmtree(first, ignore_errors=True)
    result = run(train_command("unused", first, *common, steps=STEPS, every=STEPS))
    if result.returncode:
        raise RuntimeError(result.stderr[-3000:])
    seconds = {step: [] for step in args.resume_at}
    for _ in range(args.repeats):
        for step in args.resume_at:
            model_dir = os.path.join(args.work_dir, f"at-{step}")
            _with_step(first, model_dir, step)
            command = train_command("unused", model_dir, *common, steps=step + 100, every=1000)
            seconds[step].append(round(_time_to_first_step(command, step + 1), 2))
            print(f"resume at step {step}: first step after {seconds[step][-1]} s", flush=True)
    record = {"dataset": dataset, "seconds_to_first_step": seconds}
    print(json.dumps(record))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return record
