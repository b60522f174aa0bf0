"""Machine, versions, date and command of a run, and its Markdown tables."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import time

from benchmarks import flags, machine
from benchmarks.peers import ours

PACKAGES = ("tensorflow", "keras", "tf-keras", "tf-models-official", "torch", "ctranslate2")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(prog: str, argv: list[str], malloc_setting: str) -> dict:
    """Machine, versions, date, the command (`prog`, the command's words up to the flags, then
    `argv`), the OpenMP wait policy and the malloc setting of a run."""
    return {
        "machine": machine.description(),
        "versions": {"python": platform.python_version(), **{p: _version(p) for p in PACKAGES}},
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": flags.command(prog, argv),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "malloc": malloc_setting,
    }


def header(result: dict, command: str | None = None) -> list[str]:
    """Machine, versions, date and command lines of an `environment()` result, for a
    benchmark's Markdown; `command` replaces the quoted command line."""
    versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v)
    command = command or f"`{result['command']}`"
    return [f"Machine: {result['machine']}", f"Versions: {versions}", f"Date: {result['date']}",
            f"Command: {command}"]  # fmt: skip


def markdown(result: dict) -> str:
    wait = result["omp_wait_policy"]
    command = f"`{result['command']}`" + (f" with OMP_WAIT_POLICY={wait}" if wait else "")
    command += f", glibc malloc: {result['malloc']}"
    lines = [*header(result, command), f"Spec: {result['spec']}", ""]
    if result["workload"] == "scaling":
        lines += _scaling(result)
    else:
        lines += _ratios(result)
    lines += [f"Skipped {name}: {why}" for name, why in result["skipped"].items()]
    return "\n".join(lines) + "\n"


def _ratios(result: dict) -> list[str]:
    unit = "target tokens/s" if result["workload"] == "train" else "output tokens/s"
    rates, mine = result["tokens_per_s"], result["tokens_per_s"].get(ours.NAME)
    lines = [f"| system | parameters | {unit} (median) | each run | ours / it | it / ours |",
             "|---|---:|---:|---|---:|---:|"]  # fmt: skip
    for name, rate in rates.items():
        runs = ", ".join(f"{r:.0f}" for r in result["runs"][name])
        lines.append(f"| {name} | {result['parameters'][name]:,} | {rate:.0f} | {runs} | "
                     f"{mine / rate:.2f} | {rate / mine:.2f} |")  # fmt: skip
    return lines


def _scaling(result: dict) -> list[str]:
    lines = ["Decoding, forced output length (cost per output token relative to 16 tokens):",
             "", "| system | output tokens | output tokens/s (median) | cost per token vs 16 "
             "| ours / it |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    rates = result["tokens_per_s"]
    for name, by_length in rates.items():
        for n, rate in by_length.items():
            cost, mine = result["relative_cost"][name][n], rates[ours.NAME][n]
            lines.append(f"| {name} | {n} | {rate:.0f} | {cost:.2f} | {mine / rate:.2f} |")
    serving = result["serving"]
    if "skipped" in serving:
        return lines + ["", f"Serving: skipped, {serving['skipped']}"]
    rates = serving["sentences_per_s"]
    first = next(iter(rates.values()))
    lines += ["", f"Serving (`serving_default` in process, {serving['model_dir']}, first "
              f"{serving['sentences']} test sources in file order, beam {serving['beam']}):",
              "", "| batch | sentences/s (median) | vs the first batch size |",
              "|---:|---:|---:|"]  # fmt: skip
    return lines + [f"| {b} | {r:.1f} | {r / first:.2f} |" for b, r in rates.items()]
