"""Latency (p50/p90) and throughput of the exported `serving_default` signature.

    python benchmarks/run.py serving --export-dir serving/models/transformer/1
    python benchmarks/run.py serving --model-dir runs/en_de --grpc   # exports first
    python benchmarks/run.py serving        # no model: the tiny untrained test model
    python benchmarks/run.py serving --model-dir runs/sample_en_de --documents 8
    python benchmarks/run.py serving --export-dir A/1 --compare-export B/1 --batch-sizes 64

Sources are the English side of the bundled sample test split, cycled into batches of each
size. "in-process" calls the signature of `tf.saved_model.load`; "grpc" goes through
`keras_transformer.serving.client` and the test double
`keras_transformer.testing.serving_double` on 127.0.0.1 (protocol and serialization overhead,
not TF Serving's own performance). Results go to stdout (Markdown) and `--output` (JSON, with
machine, versions and the command).

`--documents K` measures whole inputs instead: the test split's lines grouped into documents
of 2 to 12 consecutive lines (joined by spaces), K documents a request, against the very same
lines sent as single-sentence inputs, the same lines a request; sentences per second of each,
alternating which goes first in each round (`--iterations` rounds over the whole split).

`--compare-export B` is an A/B of two exports of the same run (say, made by two commits, or
the float32 and the bfloat16 export: `keras-transformer-export --dtype bfloat16`): the whole
test split translated in batches of each size, by A and by B alternately (`--iterations`
rounds, every other one B first), sentences/s of each, how many translations differ, each
one's BLEU against the references, its bytes on disk and its load time.

`--untrained base` stands in for a trained base-size run: the preset's sizes with random
weights (seed 0) and a `--vocab-size` SentencePiece model of the bundled En-De training split,
whose searches run to their maximum length (input + 50). `--sentences N` takes the first N
test sentences (default 1000).

`--load SECONDS` is a load test: `--clients` (32) concurrent gRPC clients send the mix of
`keras_transformer.serving.load` (short sentences, documents, n-best, sampling, score, hostile
inputs) to the test double in its own process; requests, failures, sentences/s, p50/p99
latency and the server's memory (first and last ten seconds). `--batching MAX,TIMEOUT_US,
THREADS ...` adds runs of the batchable mix (no sampling) without and with an emulation of TF
Serving's `--enable_batching` (BUILD.md, "Batching"):

    python benchmarks/run.py serving --model-dir runs/sample_en_de --load 60
    python benchmarks/run.py serving --export-dir DIR --load 30 --batching 32,2000,2
"""

from __future__ import annotations

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

from benchmarks import flags, machine  # noqa: E402
from keras_transformer import malloc, onednn  # noqa: E402
from keras_transformer.config import SearchOptions  # noqa: E402
from keras_transformer.data.corpus import read_pairs  # noqa: E402
from keras_transformer.decoding.evaluation import group_documents  # noqa: E402
from keras_transformer.serving import client, load  # noqa: E402
from keras_transformer.serving.export import export_savedmodel  # noqa: E402


def add_model_arguments(parser, where) -> None:
    """--model-dir or --untrained (in the exclusive group `where`) and --vocab-size: the
    model `model_dir_for` gives, exported first."""
    flags.add(where, model_dir={"help": "a trained model directory (exported first)"})
    where.add_argument(
        "--untrained", choices=("base", "big", "quick", "tiny"),
        help="instead of a trained model: this preset with random weights and a --vocab-size "
        "SentencePiece model of the bundled En-De corpus (exported first). Random weights never "
        "end at EOS, so every search runs to its length limit: right for a step's cost, wrong "
        "for serving figures, where a trained model's short outputs make fixed costs and the "
        "early stop count (benchmarks/results/2026-11-29-issue-54-trained-base.md)",
    )  # fmt: skip
    flags.add(parser, vocab_size={"default": 32000, "help": "with --untrained"})


def model_dir_for(args, workdir: str) -> str:
    """--model-dir, else an untrained model: --untrained's preset, else the tiny test model."""
    if args.model_dir:
        return args.model_dir
    from keras_transformer.testing import model_dir

    if args.untrained:
        texts = [text for pair in read_pairs("sample_en_de", "train") for text in pair]
        directory = os.path.join(workdir, f"untrained_{args.untrained}")
        return model_dir.make_preset_model_dir(directory, args.untrained, args.vocab_size, texts)
    return model_dir.make_model_dir(os.path.join(workdir, "tiny_model"))


def export_dir_for(args, workdir: str) -> str:
    """--export-dir, else the model's export with `--beam-size` and one translation a sentence."""
    if args.export_dir:
        return args.export_dir
    search = SearchOptions(beam_size=args.beam_size)
    return export_savedmodel(model_dir_for(args, workdir), workdir, search=search, n_best=1)


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


def documents_vs_sentences(call, sentences: list[str], per_request: int, rounds: int) -> list:
    """Rows of sentences per second for the same lines as documents and as single sentences
    (module docstring), one row per mode and round, the first mode alternating."""
    groups = group_documents(len(sentences), 2, 12)
    requests = {"documents": [], "sentences": []}
    for start in range(0, len(groups), per_request):
        chosen = groups[start : start + per_request]
        requests["documents"].append([" ".join(sentences[i] for i in g) for g in chosen])
        requests["sentences"].append([sentences[i] for g in chosen for i in g])
    for batches in requests.values():  # warm-up: every request shape once
        for texts in batches:
            call(texts)
    rows = []
    for round_ in range(rounds):
        for mode in ("documents", "sentences")[:: 1 if round_ % 2 == 0 else -1]:
            start = time.perf_counter()
            for texts in requests[mode]:
                call(texts)
            seconds = time.perf_counter() - start
            rows.append(dict(path=mode, round=round_, requests=len(requests[mode]),
                             sentences=len(sentences), seconds=seconds,
                             sentences_per_s=len(sentences) / seconds))  # fmt: skip
    return rows


def print_documents(rows: list) -> None:
    print(
        "| round | documents sentences/s | sentences sentences/s | ratio |\n|---:|---:|---:|---:|"
    )
    for round_ in sorted({r["round"] for r in rows}):
        rate = {r["path"]: r["sentences_per_s"] for r in rows if r["round"] == round_}
        print(f"| {round_} | {rate['documents']:.1f} | {rate['sentences']:.1f} "
              f"| {rate['documents'] / rate['sentences']:.3f} |")  # fmt: skip
    total = {
        m: sum(r["seconds"] for r in rows if r["path"] == m) for m in ("documents", "sentences")
    }
    print(f"all rounds: documents / sentences = {total['sentences'] / total['documents']:.3f}")


def directory_bytes(path: str) -> int:
    """The bytes of the files under `path`."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def load_signature(path: str) -> tuple:
    """`(serving_default of the export at path, seconds tf.saved_model.load took)`."""
    start = time.perf_counter()
    signature = tf.saved_model.load(path).signatures["serving_default"]
    return signature, time.perf_counter() - start


def compare_exports(
    paths: dict, sentences: list[str], batch: int, rounds: int, references: list[str]
) -> dict:
    """Sentences/s of each export's `serving_default` over all `sentences` in batches of
    `batch`, alternating which goes first; the number of differing translations; each one's
    BLEU against `references`, bytes on disk and load time."""
    import sacrebleu

    loaded = {name: load_signature(path) for name, path in paths.items()}
    signatures = {name: signature for name, (signature, _) in loaded.items()}
    chunks = [sentences[i : i + batch] for i in range(0, len(sentences), batch)]

    def translate(signature):
        out = [signature(text=tf.constant(chunk))["translations"].numpy() for chunk in chunks]
        return [t.decode() for part in out for t in part.reshape(-1)]

    outputs = {name: translate(signature) for name, signature in signatures.items()}  # warm-up
    seconds = {name: [] for name in signatures}
    for round_ in range(rounds):
        for name in list(signatures)[:: 1 if round_ % 2 == 0 else -1]:
            start = time.perf_counter()
            translate(signatures[name])
            seconds[name].append(time.perf_counter() - start)
    a, b = outputs.values()
    rates = {name: [len(sentences) / t for t in times] for name, times in seconds.items()}
    bleu = {name: sacrebleu.corpus_bleu(out, [references]).score
            for name, out in outputs.items()}  # fmt: skip
    return dict(batch=batch, sentences=len(sentences), rounds=rounds, sentences_per_s=rates,
                median={name: float(np.median(r)) for name, r in rates.items()},
                differing_translations=sum(x != y for x, y in zip(a, b)), bleu=bleu,
                bytes={name: directory_bytes(path) for name, path in paths.items()},
                load_seconds={name: t for name, (_, t) in loaded.items()})  # fmt: skip


def environment(args) -> dict:
    """Where and on what a result was measured."""
    return dict(
        export_dir=args.export_dir,
        model_dir=args.model_dir or f"untrained {args.untrained or 'tiny test'} model",
        cpu_isa_cap=onednn.isa_cap() or None,
        malloc=os.environ.get(malloc.ENV_VAR, "keep"),  # this process's and the peers' workers'
        date=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        machine=dict(platform=platform.platform(), processor=machine.cpu_name(),
                     cpus=os.cpu_count(), gpus=len(tf.config.list_physical_devices("GPU"))),
        versions=dict(python=platform.python_version(), tensorflow=tf.__version__,
                      tensorflow_text=tensorflow_text.__version__),
    )  # fmt: skip


def main(argv=None, prog: str = "python benchmarks/run.py serving") -> int:
    parser = flags.parser(prog, __doc__)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--export-dir", help="a version directory of an export")
    add_model_arguments(parser, where)
    parser.add_argument(
        "--beam-size", type=int, default=SearchOptions().beam_size, help="when exporting here"
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--grpc", action="store_true", help="also through the gRPC test double")
    parser.add_argument(
        "--compare-export", metavar="DIR",
        help="with --export-dir: an A/B of the two exports (sentences/s on the whole test "
        "split at each --batch-sizes, alternating; differing translations)",
    )  # fmt: skip
    parser.add_argument(
        "--sentences", type=int, default=1000, help="the first N sentences of the test split"
    )
    parser.add_argument("--output", default=None, help="JSON file for the results")
    parser.add_argument(
        "--documents", type=int, default=None, metavar="K",
        help="measure K documents a request against their lines as single sentences",
    )  # fmt: skip
    parser.add_argument(
        "--load", type=float, default=None, metavar="SECONDS",
        help="instead: a load test, --clients concurrent gRPC clients sending the mixed "
        "requests of keras_transformer.serving.load for SECONDS to the test double in its own "
        "process (memory sampled every second)",
    )  # fmt: skip
    parser.add_argument("--clients", type=int, default=32, help="with --load")
    parser.add_argument(
        "--batching", nargs="*", default=[], metavar="MAX_BATCH,TIMEOUT_US,THREADS",
        help="with --load: also emulate TF Serving's --enable_batching with each of these "
        "batching.config values (sampling left out of the mix: its scalar inputs cannot be "
        "batched), beside the same mix without batching",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.sentences < 1:
        parser.error(f"--sentences must be at least 1. Received: {args.sentences}")
    pairs = list(read_pairs("sample_en_de", "test", limit=args.sentences))
    sentences = [src for src, _ in pairs]
    if args.load:
        return load_test(args, sentences)
    if args.compare_export:
        if not args.export_dir:
            parser.error("--compare-export needs --export-dir (the A side)")
        return compare_test(args, sentences, [tgt for _, tgt in pairs])
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
        if args.documents:
            call = paths["grpc" if args.grpc else "in-process"]
            rows = documents_vs_sentences(call, sentences, args.documents, args.iterations)
        else:
            rows = [dict(path=name, **measure(call, sentences, batch, args.iterations))
                    for name, call in paths.items() for batch in args.batch_sizes]  # fmt: skip
        if args.grpc:
            server.stop(grace=None)
    report = dict(command=" ".join([sys.executable, *sys.argv]), rows=rows, **environment(args))
    if args.documents:
        print_documents(rows)
    else:
        print_table(rows)
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def compare_test(args, sentences: list[str], references: list[str]) -> int:
    """The A/B of --export-dir (A) and --compare-export (B) at each --batch-sizes."""
    paths = {"A": args.export_dir, "B": args.compare_export}
    rows = [compare_exports(paths, sentences, batch, args.iterations, references)
            for batch in args.batch_sizes]  # fmt: skip
    print("| batch | A sentences/s | B sentences/s | B / A | differing translations "
          "| BLEU A | BLEU B |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        a, b = row["median"]["A"], row["median"]["B"]
        print(f"| {row['batch']} | {a:.2f} | {b:.2f} | {b / a:.3f} | "
              f"{row['differing_translations']} of {row['sentences']} | "
              f"{row['bleu']['A']:.2f} | {row['bleu']['B']:.2f} |")  # fmt: skip
    for name, path in paths.items():
        print(f"{name}: {path}: {rows[0]['bytes'][name] / 1e6:.1f} MB on disk, "
              f"loaded in {rows[0]['load_seconds'][name]:.1f} s")  # fmt: skip
    report = dict(command=" ".join([sys.executable, *sys.argv]), rows=rows,
                  compare=paths, **environment(args))  # fmt: skip
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def load_test(args, sentences: list[str]) -> int:
    """The mixed load against the test double, once as is, then (if --batching) with the
    batchable mix without and with each batching emulation."""
    runs = [("mixed", None, ())]
    if args.batching:
        runs += [("batchable", None, ("sample",))]
        runs += [(f"batchable, batching {b}", b, ("sample",)) for b in args.batching]
    with tempfile.TemporaryDirectory() as workdir:
        export_dir = export_dir_for(args, workdir)
        rows = []
        for name, batching, without in runs:
            server, address = load.start_server(export_dir, batching)
            try:
                draw = load.mixed_requests(sentences, without=without)
                load.warm_up(address, draw)  # every kind twice, one at a time
                report = load.run_load(address, draw, args.clients, args.load, server.pid)
            finally:
                server.kill()
                server.wait()
            rows.append(dict(run=name, **report))
            print(json.dumps(rows[-1]), flush=True)
    print_load(rows)
    if args.output:
        Path(args.output).write_text(json.dumps(dict(
            command=" ".join([sys.executable, *sys.argv]), rows=rows, **environment(args)
        ), indent=2) + "\n")  # fmt: skip
    return 0


def print_load(rows: list) -> None:
    print("| run | requests | failed | hostile: INVALID_ARGUMENT | sentences/s | p50 ms "
          "| p99 ms | server MB first 10 s -> last 10 s |\n"
          "|---|---:|---:|---:|---:|---:|---:|---|")  # fmt: skip
    for r in rows:
        memory = r.get("memory_mb", {})
        print(f"| {r['run']} | {r['requests']} | {r['failed']} | {r['hostile_invalid_argument']}"
              f"/{r['hostile']} | {r['sentences_per_sec']} | {r['p50_ms']} | {r['p99_ms']} | "
              f"{memory.get('first_10s')} -> {memory.get('last_10s')} "
              f"({100 * memory.get('growth', 0):+.1f}%) |")  # fmt: skip


def print_table(rows: list) -> None:
    print("| path | batch | p50 ms | p90 ms | sentences/s |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['path']} | {r['batch']} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} "
              f"| {r['sentences_per_s']:.1f} |")  # fmt: skip
