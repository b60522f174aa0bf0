"""Dated scripts (`benchmarks/results/YYYY-MM-DD-*.py`) are not importable by name: a later one
that reuses an earlier one's functions loads it with `script`.

    step_ops = script("2026-11-29-avx2-step-ops.py")
"""

import importlib.util
import pathlib
from types import ModuleType

RESULTS = pathlib.Path(__file__).with_name("results")


def script(name: str) -> ModuleType:
    """The dated script `benchmarks/results/<name>`, run as a module."""
    path = RESULTS / name
    if not path.is_file():
        raise FileNotFoundError(f"No dated script {name!r} in {RESULTS}")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
