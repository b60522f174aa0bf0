"""`python -m benchmarks WORKLOAD [KIND] [FLAGS]`: the benchmark command (`benchmarks.catalog`)."""

import sys

from benchmarks.catalog import main

sys.exit(main(prog="python -m benchmarks"))
