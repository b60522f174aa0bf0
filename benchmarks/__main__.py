"""`python -m benchmarks WORKLOAD [KIND] [FLAGS]`: the benchmark command (`benchmarks.catalog`)."""

import sys

from benchmarks.catalog import main

if __name__ == "__main__":  # not when a spawned worker process imports it
    sys.exit(main(prog="python -m benchmarks"))
