"""Latency (p50/p90) and throughput of the exported `serving_default` signature.

    python benchmarks/serving_benchmark.py --export-dir serving/models/transformer/1
    python benchmarks/serving_benchmark.py --model-dir runs/en_de --grpc   # exports first
    python benchmarks/serving_benchmark.py        # no model: the tiny untrained test model

Sources are the English side of the bundled sample test split, cycled into batches of each
size. "in-process" calls the signature of `tf.saved_model.load`; "grpc" goes through
`keras_transformer.serving.client` and the test double
`keras_transformer.testing.serving_double` on 127.0.0.1 (protocol and serialization overhead,
not TF Serving's own performance). Results go to stdout (Markdown) and `--output` (JSON, with
machine, versions and the command).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402
from machine import cpu_name  # noqa: E402  (benchmarks/machine.py, beside this script)

from keras_transformer.config import SearchOptions  # noqa: E402
from keras_transformer.data.corpus import read_pairs  # noqa: E402
from keras_transformer.serving import client  # noqa: E402
from keras_transformer.serving.export import export_savedmodel  # noqa: E402


def export_dir_for(args, workdir: str) -> str:
    if args.export_dir:
        return args.export_dir
    model_dir = args.model_dir
    if model_dir is None:
        from keras_transformer.testing.model_dir import make_model_dir

        model_dir = make_model_dir(os.path.join(workdir, "tiny_model"))
    return export_savedmodel(
        model_dir, workdir, search=SearchOptions(beam_size=args.beam_size), n_best=1
    )


def measure(call, sentences: list[str], batch: int, iterations: int, warmup: int = 2) -> dict:
    batches = [[sentences[(i * batch + j) % len(sentences)] for j in range(batch)]
               for i in range(iterations + warmup)]  # fmt: skip
    for texts in batches[:warmup]:
        call(texts)
    latencies = []
    for texts in batches[warmup:]:
        start = time.perf_counter()
        call(texts)
        latencies.append(time.perf_counter() - start)
    ms = np.array(latencies) * 1000
    return dict(batch=batch, iterations=iterations, p50_ms=float(np.percentile(ms, 50)),
                p90_ms=float(np.percentile(ms, 90)),
                sentences_per_s=batch * iterations / float(np.sum(latencies)))  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--export-dir", help="a version directory of an export")
    where.add_argument("--model-dir", help="a trained model directory (exported first)")
    parser.add_argument(
        "--beam-size", type=int, default=SearchOptions().beam_size, help="when exporting here"
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--grpc", action="store_true", help="also through the gRPC test double")
    parser.add_argument("--output", default=None, help="JSON file for the results")
    args = parser.parse_args(argv)
    sentences = [src for src, _ in read_pairs("sample_en_de", "test", limit=1000)]
    with tempfile.TemporaryDirectory() as workdir:
        export_dir = export_dir_for(args, workdir)
        signature = tf.saved_model.load(export_dir).signatures["serving_default"]
        paths = {"in-process": lambda texts: signature(text=tf.constant(texts))}
        if args.grpc:
            from keras_transformer.testing.serving_double import (
                SavedModelPredictionService,
                serve_grpc,
            )

            server, port = serve_grpc(SavedModelPredictionService(export_dir))
            paths["grpc"] = lambda texts: client.predict_grpc(f"127.0.0.1:{port}", texts)
        rows = [dict(path=name, **measure(call, sentences, batch, args.iterations))
                for name, call in paths.items() for batch in args.batch_sizes]  # fmt: skip
        if args.grpc:
            server.stop(grace=None)
    report = dict(
        command=" ".join([sys.executable, *sys.argv]), export_dir=args.export_dir,
        model_dir=args.model_dir or "tiny untrained test model", rows=rows,
        date=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        machine=dict(platform=platform.platform(), processor=cpu_name(),
                     cpus=os.cpu_count(), gpus=len(tf.config.list_physical_devices("GPU"))),
        versions=dict(python=platform.python_version(), tensorflow=tf.__version__,
                      tensorflow_text=tensorflow_text.__version__),
    )  # fmt: skip
    print("| path | batch | p50 ms | p90 ms | sentences/s |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['path']} | {r['batch']} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} "
              f"| {r['sentences_per_s']:.1f} |")  # fmt: skip
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
