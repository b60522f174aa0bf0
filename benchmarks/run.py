"""`python benchmarks/run.py WORKLOAD [KIND] [FLAGS]`: the benchmark command (`benchmarks.catalog`),
the same as `python -m benchmarks` from the repository root.

Python puts this script's folder first on `sys.path`, not the repository root that holds the
`benchmarks` package, so the root takes its place; nothing else changes."""

import os
import sys

sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchmarks.catalog import main  # noqa: E402  (once the root is on sys.path)

if __name__ == "__main__":  # not when a spawned worker process imports it
    sys.exit(main(prog="python benchmarks/run.py"))
