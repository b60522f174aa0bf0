"""CTranslate2 in a process of its own: one translator a process, as a server runs it.

CTranslate2's wheel runs its products on GNU OpenMP (libgomp). With two translators in one
process (float32 and int8 side by side, each with `intra_threads` = cores), libgomp manages
more threads than the machine has cores and stops spinning between parallel regions, so
every region waits for its threads to wake: on the 2-core EPYC (2026-11-27) one ~50-piece
sentence of the default run's model took 200 ms instead of 20 with the int8 translator
alive beside the float32 one, and stayed slow after it was deleted. TensorFlow's threads in
the same process do not do this (they are not OpenMP's). So the benchmarks start one `Worker`
(a `benchmarks.process_worker.ProcessWorker`) per compute type (`serving single`, and the
decode and scaling workloads' CTranslate2 rows). `serving single`'s requests are timed in the
worker (SentencePiece encoding, `translate_batch`, decoding) and come back with the
translations, so the pipe between the processes is not counted.

Each worker sets glibc's `malloc` as the package's commands and `benchmarks/run.py` set their
own process (`keras_transformer.malloc.keep_freed_memory`; `KERAS_TRANSFORMER_MALLOC=default`
leaves glibc's defaults in both). With glibc's defaults CTranslate2 maps and unmaps its large
buffers at every step: base at batch 64 on the 2-core EPYC spent 42.7 s of 39.7 s wall in the
kernel (21.8 million page faults) and ran at 1.61 sentences/s, 3.15 with the setting
(2026-11-29-issue-54-peer-malloc.md).
"""

from __future__ import annotations

import os

from benchmarks.process_worker import ProcessWorker, Timed, serve_requests


def _serve(
    conn, path: str, spm_path: str | None, compute_type: str, search: dict | None, threads: int
):
    """The worker: load one translator, then answer requests until it receives None:
    `("texts", texts)` -> `Timed(translations, seconds)` (SentencePiece `spm_path`, `search`);
    `("tokens", (tokens, options))` -> `Timed(the best hypothesis' length per source,
    seconds)` (pre-tokenized sources, `translate_batch`'s own options)."""
    from keras_transformer import malloc

    malloc.keep_freed_memory()  # glibc's malloc set as in the benchmark's own process
    import ctranslate2

    processor = None
    if spm_path is not None:
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(model_file=spm_path)
    translator = ctranslate2.Translator(
        path, device="cpu", compute_type=compute_type, inter_threads=1,
        intra_threads=threads,
    )  # fmt: skip

    def handle(kind, payload):
        if kind == "texts":
            return _translate_texts(translator, processor, payload, search)
        tokens, options = payload
        return [len(r.hypotheses[0]) for r in translator.translate_batch(tokens, **options)]

    serve_requests(conn, handle)


def _translate_texts(translator, processor, texts: list, search: dict) -> list:
    tokens = processor.encode(texts, out_type=str)
    longest = max(len(t) for t in tokens)
    results = translator.translate_batch(
        tokens, beam_size=search["beam_size"], length_penalty=search["alpha"],
        patience=search.get("patience", 1.0), max_batch_size=len(texts),
        max_decoding_length=min(longest + 1 + search["max_extra_length"], search["limit"]),
    )  # fmt: skip
    return processor.decode([r.hypotheses[0] for r in results])


class Worker(ProcessWorker):
    """`worker(texts) -> Timed(translations, seconds)`: a CTranslate2 model directory `path`
    with SentencePiece `spm_path`, in `compute_type`, in a process of its own. `search`:
    beam_size, alpha, max_extra_length (outputs of at most the batch's longest source + that
    many pieces: CTranslate2 takes one limit a batch), limit (the model's last position) and
    optionally patience (its early stop: an item ends once beam_size * patience hypotheses
    have finished; default 1).
    `threads`: its `intra_threads` (default: the machine's cores).
    `worker.translate_tokens(tokens, **options)`: pre-tokenized sources (`spm_path` and
    `search` may be None), `translate_batch`'s options as given."""

    def __init__(
        self,
        path: str,
        spm_path: str | None,
        compute_type: str,
        search: dict | None = None,
        threads: int | None = None,
    ):
        args = (path, spm_path, compute_type, search, threads or os.cpu_count())
        super().__init__(_serve, args, f"CTranslate2 {compute_type} worker for {path!r}")

    def translate_tokens(self, tokens: list, **options) -> Timed:
        """`Timed(the best hypothesis' length per source, seconds)` of `translate_batch(tokens,
        **options)` in the worker."""
        return self.request("tokens", (tokens, options))
