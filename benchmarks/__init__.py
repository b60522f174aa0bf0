"""The benchmarks of keras-transformer, one runner: `python -m benchmarks WORKLOAD [KIND] ...`
(or `python benchmarks/run.py ...`); `benchmarks/runner.py` lists the workloads."""
