"""Issue 54: how exact is each system's early stop? Each against its own search run to its limit.

    PYTHONPATH=. python benchmarks/results/2026-12-02-issue-54-ctranslate2-stop.py RUN OUT.json \
        [--patience 1 2 4] [--threads 2] [--skip-ours] [--dtypes float32 bfloat16] [--cpu-isa avx2]

The bundled test split, beam 4, the run's own alpha, the sources in chunks of 64 in test order
(as `serving single --throughput 64` sends them), each line one sentence (no segmentation).
For each system, its early stop against its search without one (the same beams, run to the
length limit):

- ours (float32; `--dtypes` adds bfloat16: `Translator.translate`, batch 64,
  `DocumentOptions.sentences()` as `pipelines/evaluate.py`): `stop_lookahead` "next" against
  "limit" of the same dtype (`limit` never changes a result: it stops only when no live beam
  can win at any length up to the limit, so it is the reference).
- CTranslate2 float32 (`translate_batch`, the options of `benchmarks/ctranslate2_process.py`,
  one length limit a chunk: its longest source + 1 + 50): `patience` P (an item ends once
  `beam_size * P` hypotheses have finished; its default P = 1) against P = 1000, where no
  item can collect that many before its last step.

Each row: translations unlike the reference's, BLEU and chrF against the references, seconds
for the whole split (one pass each after a warm-up; CTranslate2 in a process of its own as the
benchmarks run it, `intra_threads` = `--threads`, after our searches are done). A one-off
measurement kept as the command behind 2026-12-02-issue-54-ctranslate2-stop.md."""

import argparse
import json
import os
import tempfile
import time

CHUNK = 64
PATIENCE_TO_LIMIT = 1000.0


def chunks(items: list, size: int = CHUNK) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def row(system: str, hypotheses: list, reference: list, references: list, seconds: float):
    from keras_transformer.decoding.evaluation import score_translations

    scores = score_translations(hypotheses, references)
    differ = sum(a != b for a, b in zip(hypotheses, reference))
    out = dict(system=system, differ=differ, sentences=len(hypotheses), bleu=scores["bleu"],
               chrf=scores["chrf"], seconds=seconds)  # fmt: skip
    print(f"{system:42s} differ {differ:5d}  BLEU {out['bleu']:6.2f}  chrF {out['chrf']:6.2f}  "
          f"{seconds:7.1f} s", flush=True)  # fmt: skip
    return out


def ours(model, tokenizer, alpha, sources, references, dtype: str) -> list[dict]:
    from keras_transformer import DocumentOptions, SearchOptions
    from keras_transformer.decoding import Translator

    outputs = {}
    for stop in ("limit", "next"):
        search = SearchOptions(alpha=alpha, stop_lookahead=stop)
        translator = Translator(model, tokenizer, search, documents=DocumentOptions.sentences())
        translator.translate(sources[:CHUNK], batch_size=CHUNK, progress=False)  # traces
        start = time.perf_counter()
        hyps = []
        for chunk in chunks(sources):
            hyps += translator.translate(chunk, batch_size=CHUNK, progress=False)[0]
        outputs[stop] = (hyps, time.perf_counter() - start)
    reference = outputs["limit"][0]
    return [row(f"ours {dtype}, {stop}", hyps, reference, references, seconds)
            for stop, (hyps, seconds) in outputs.items()]  # fmt: skip


def _serve(conn, path: str, threads: int, alpha: float, limit: int) -> None:
    """The CTranslate2 worker: `("tokens", (chunks of pieces, patience))` -> the best
    hypothesis' pieces of each source."""
    from keras_transformer import malloc

    malloc.keep_freed_memory()
    import ctranslate2

    from benchmarks.process_worker import serve_requests

    translator = ctranslate2.Translator(path, device="cpu", compute_type="float32",
                                        inter_threads=1, intra_threads=threads)  # fmt: skip

    def handle(kind, payload):
        pieces, patience = payload
        hyps = []
        for chunk in pieces:
            results = translator.translate_batch(
                chunk, beam_size=4, length_penalty=alpha, patience=patience,
                max_batch_size=len(chunk),
                max_decoding_length=min(max(map(len, chunk)) + 1 + 50, limit),
            )  # fmt: skip
            hyps += [r.hypotheses[0] for r in results]
        return hyps

    serve_requests(conn, handle)


def ctranslate2_rows(model, config, run, alpha, sources, references, patiences, threads):
    import sentencepiece

    from benchmarks.process_worker import ProcessWorker
    from keras_transformer import artifacts
    from keras_transformer.data.tokenizer import remove_invisible_text
    from keras_transformer.serving.ctranslate2_export import (
        export_ctranslate2,
        sentencepiece_pieces,
    )

    spm = artifacts.path(run, artifacts.TOKENIZER_FILE)
    path = export_ctranslate2(model, os.path.join(tempfile.mkdtemp(), "m"),
                              sentencepiece_pieces(spm))  # fmt: skip
    processor = sentencepiece.SentencePieceProcessor(model_file=spm)
    pieces = chunks(processor.encode([remove_invisible_text(s) for s in sources], out_type=str))
    args = (path, threads, alpha, config.max_length - 1)
    worker = ProcessWorker(_serve, args, f"CTranslate2 float32 worker for {path!r}")
    try:
        worker.request("tokens", (pieces[:1], 1.0))  # warm-up
        outputs = {
            p: worker.request("tokens", (pieces, p)) for p in [*patiences, PATIENCE_TO_LIMIT]
        }
    finally:
        worker.close()
    outputs = {p: (processor.decode(t.outputs), t.seconds) for p, t in outputs.items()}
    reference = outputs[PATIENCE_TO_LIMIT][0]
    return [row(f"CTranslate2 float32, patience {p:g}", hyps, reference, references, seconds)
            for p, (hyps, seconds) in outputs.items()]  # fmt: skip


def versions() -> dict:
    import platform

    import ctranslate2
    import tensorflow as tf

    return dict(python=platform.python_version(), tensorflow=tf.__version__,
                ctranslate2=ctranslate2.__version__)  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("output", help="where the JSON goes")
    parser.add_argument("--patience", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--skip-ours", action="store_true")
    parser.add_argument(
        "--dtypes",
        nargs="+",
        default=["float32"],
        choices=["float32", "bfloat16"],
        help="ours in each (`artifacts.load_trained`'s dtype)",
    )
    parser.add_argument("--cpu-isa", default="native", help="native or avx2, as run.py's flag")
    args = parser.parse_args()

    from benchmarks import machine
    from keras_transformer import artifacts, malloc
    from keras_transformer.data.corpus import read_pairs

    machine.cap_cpu_isa(args.cpu_isa)  # before any kernel runs; the worker inherits it
    malloc.keep_freed_memory()  # as benchmarks/run.py and its CTranslate2 workers set it
    model, config, tokenizer = artifacts.load_trained(args.model_dir)
    alpha = artifacts.run_eval_alpha(args.model_dir)
    pairs = list(read_pairs("sample_en_de", "test"))
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    print(f"{args.model_dir}: alpha {alpha}, {len(sources)} sentences", flush=True)
    rows = []
    for dtype in [] if args.skip_ours else args.dtypes:
        loaded = (
            model if dtype == "float32" else artifacts.load_trained(args.model_dir, dtype=dtype)[0]
        )
        rows += ours(loaded, tokenizer, alpha, sources, references, dtype)
    rows += ctranslate2_rows(model, config, args.model_dir, alpha, sources, references,
                             args.patience, args.threads)  # fmt: skip
    out = dict(model_dir=args.model_dir, alpha=alpha, threads=args.threads, rows=rows,
               date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               machine=machine.description(), versions=versions())  # fmt: skip
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
