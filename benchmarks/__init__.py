"""The benchmarks of keras-transformer, one command: `python -m benchmarks WORKLOAD [KIND] ...`
(or `python benchmarks/run.py ...`); `benchmarks/catalog.py` lists the workloads."""
