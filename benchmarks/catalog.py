"""The catalog of benchmarks: each workload (a question people rerun) maps its kinds of
measurement to the module that runs them, and `main` runs the one a command names.

    python benchmarks/run.py WORKLOAD [KIND] [FLAGS]     # or: python -m benchmarks ...
    python benchmarks/run.py train --with-peers --json /tmp/train.json
    python benchmarks/run.py train fit --config tiny --batch-tokens 3072 --steps 30
    python benchmarks/run.py WORKLOAD [KIND] --help      # that measurement's flags

KIND defaults to the first one listed under its workload. `--workload WORKLOAD` (the earlier
form, quoted in results) is the same as the positional WORKLOAD. Finished studies are not
here: their results and the commit that ran them are dated files in benchmarks/results/.
"""

from __future__ import annotations

import importlib
import shlex
import sys
from dataclasses import dataclass

from keras_transformer import malloc, onednn


@dataclass(frozen=True)
class Kind:
    """One measurement: `benchmarks.<module>.main(argv, prog, **keywords)` and what it does."""

    module: str
    summary: str
    workload: str | None = None  # passed to side_by_side, which serves three workloads

    def run(self, argv: list[str], prog: str):
        """Import the module (only now: some import TensorFlow) and run its `main`."""
        main = importlib.import_module(f"benchmarks.{self.module}").main
        keywords = {"workload": self.workload} if self.workload else {}
        return main(argv, prog=prog, **keywords)


PEERS = "ours beside every installed peer (Model Garden, PyTorch, CTranslate2), alternating"
WORKLOADS: dict[str, dict[str, Kind]] = {
    "train": {
        "peers": Kind("side_by_side", f"target tokens/s of full train steps: {PEERS}", "train"),
        "fit": Kind("train_benchmark", "target tokens/s and MFU of model.fit (GPU, JAX)"),
    },
    "decode": {
        "peers": Kind("side_by_side", f"output tokens/s of beam search: {PEERS}", "decode"),
        "sweep": Kind("decode_benchmark", "tokens/s by batch and length, time per step"),
        "revisions": Kind(
            "revisions_benchmark", "the plain search of two source trees, alternating processes"
        ),
    },
    "scaling": {
        "peers": Kind(
            "side_by_side", "cost per token by output length; serving batch 8 vs 64", "scaling"
        ),  # fmt: skip
    },
    "serving": {
        "latency": Kind("serving_benchmark", "p50/p90 and sentences/s of the export; --load"),
        "single": Kind(
            "latency_benchmark", "one sentence a request by length, beside CTranslate2; --profile"
        ),
    },
    "markup": {
        "transfer": Kind(
            "markup_benchmark", "tags, protected spans, alignment AER, markup vs plain speed"
        ),
    },
    "guided": {
        "quality": Kind(
            "constraints_benchmark", "prefix, constraints, glossary on dev: shares, BLEU, speed"
        ),
        "prefill": Kind(
            "constraints_benchmark", "prefix speed: prefilled cache vs a step per piece", "prefill"
        ),
    },
    "learning": {
        "model-garden": Kind("model_garden_comparison", "dev loss and BLEU beside Model Garden"),
        "curves": Kind("compare_curves", "dev BLEU against steps and minutes of several runs"),
    },
    "gpu": {
        "check": Kind("gpu_check", "the paper's base recipe on all GPUs: step time, MFU, ..."),
    },
    "profile": {
        "tf": Kind("profile_train_step", "where a TensorFlow train step's time goes"),
        "jax": Kind("profile_train_step_jax", "where a JAX (GPU) train step's time goes"),
        "input": Kind("input_pipeline", "padding waste and speed of the input pipeline"),
        "pipeline": Kind(
            "pipeline_benchmark", "pairs/s per core by stage, first batch, resume: seek vs replay"
        ),
        "resume_start": Kind(
            "resume_start_benchmark", "start to first step of a resume on prepared shards, by step"
        ),
    },
}


def usage() -> str:
    """The module docstring and every workload's kinds, one line each."""
    lines = [__doc__.strip(), "", "workloads and kinds:"]
    for workload, kinds in WORKLOADS.items():
        for i, (name, kind) in enumerate(kinds.items()):
            lines.append(f"  {workload if i == 0 else '':9s} {name:13s} {kind.summary}")
    return "\n".join(lines) + "\n"


def split_workload(argv: list[str]) -> tuple[str | None, list[str], list[str]]:
    """(workload, the arguments that named it, the rest): the positional WORKLOAD, or
    `--workload WORKLOAD` / `--workload=WORKLOAD` anywhere in `argv`."""
    if argv and not argv[0].startswith("-"):
        return argv[0], argv[:1], argv[1:]
    for i, arg in enumerate(argv):
        if arg == "--workload" and i + 1 < len(argv):
            return argv[i + 1], argv[i : i + 2], argv[:i] + argv[i + 2 :]
        if arg.startswith("--workload="):
            return arg.split("=", 1)[1], [arg], argv[:i] + argv[i + 1 :]
    return None, [], argv


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks") -> int:
    """Run the workload that `argv` names; 0 on success, 2 on a bad workload or kind."""
    argv = sys.argv[1:] if argv is None else list(argv)
    workload, named, rest = split_workload(argv)
    if workload is None:
        stream = sys.stdout if rest in (["-h"], ["--help"]) else sys.stderr
        stream.write(usage())
        return 0 if stream is sys.stdout else 2
    if workload not in WORKLOADS:
        sys.stderr.write(usage())
        sys.stderr.write(f"error: unknown workload. Received: workload={workload!r}\n")
        return 2
    onednn.prefer_onednn()  # as the commands do, before any workload starts TensorFlow
    malloc.keep_freed_memory()  # as the commands do; CTranslate2's workers do the same
    kinds = WORKLOADS[workload]
    kind = next(iter(kinds))  # the default
    if rest and rest[0] in kinds:
        kind, named, rest = rest[0], named + rest[:1], rest[1:]
    result = kinds[kind].run(rest, prog=shlex.join([*shlex.split(prog), *named]))
    return result if isinstance(result, int) else 0
