"""`python -m benchmarks WORKLOAD [KIND] [FLAGS]`: the benchmark runner (`benchmarks.runner`)."""

import sys

from benchmarks.runner import main

sys.exit(main(prog="python -m benchmarks"))
