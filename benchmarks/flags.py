"""The workloads' command lines: one parser maker and the flags several workloads share.

Each flag's meaning is written once in `FLAGS`; a workload names the ones it takes and gives
its own default (or what else differs) with `add`:

    parser = flags.parser(prog, __doc__)
    flags.add(parser, config={"default": "tiny", "choices": ("tiny", "base")}, repeats=3)
"""

from __future__ import annotations

import argparse
import json
import shlex

RESULTS_DIR = "benchmarks/results"

# --name -> argparse keywords; `add` fills in each workload's default
FLAGS = {
    "config": {"help": "model preset (TransformerConfig)"},
    "vocab_size": {"type": int, "help": "shared vocabulary size"},
    "length": {"type": int, "help": "tokens per sentence, each side"},
    "batch": {"type": int, "help": "sentences per batch"},
    "steps": {"type": int, "help": "timed steps"},
    "repeats": {"type": int, "help": "timed rounds (median)"},
    "json": {"help": "also write the result to this file"},
    "model_dir": {"help": "a trained run (model directory)"},
    "output_dir": {"help": "where the JSON, table and plot go"},
}


def parser(prog: str | None, description: str) -> argparse.ArgumentParser:
    """A workload's parser: `prog` as the command names it, its module docstring as help."""
    return argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def add(parser: argparse.ArgumentParser, **flags) -> None:
    """Add the shared flags named by the keywords, in order: each value is the flag's default,
    or a dict of what differs from its `FLAGS` entry ("default", "help", "choices", ...)."""
    for name, value in flags.items():
        if name not in FLAGS:
            raise ValueError(f"Unknown shared flag. Received: name={name!r}")
        spec = dict(FLAGS[name])
        spec.update(value if isinstance(value, dict) else {"default": value})
        parser.add_argument("--" + name.replace("_", "-"), **spec)


def write_json(result: dict, path: str | None) -> None:
    """`result` as indented JSON at `path` (nothing without one)."""
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


def command(prog: str, argv: list[str]) -> str:
    """The command line of a run, as results record it: `prog` (the command's words up to the
    flags, e.g. "python benchmarks/run.py decode sweep"), then `argv`."""
    return shlex.join([*shlex.split(prog), *argv])
