"""CTranslate2 in a process of its own: one translator a process, as a server runs it.

CTranslate2's wheel runs its products on GNU OpenMP (libgomp). With two translators in one
process (float32 and int8 side by side, each with `intra_threads` = cores), libgomp manages
more threads than the machine has cores and stops spinning between parallel regions, so
every region waits for its threads to wake: on the 2-core EPYC (2026-11-27) one ~50-piece
sentence of the default run's model took 200 ms instead of 20 with the int8 translator
alive beside the float32 one, and stayed slow after it was deleted. TensorFlow's threads in
the same process do not do this (they are not OpenMP's). So the latency benchmark starts one
`Worker` per compute type; each request's time is measured in the worker (SentencePiece
encoding, `translate_batch`, decoding) and comes back with the translations, so the pipe
between the processes is not counted.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import NamedTuple


class Timed(NamedTuple):
    """A system's outputs with the seconds it measured itself."""

    outputs: list
    seconds: float


def _serve(conn, path: str, spm_path: str, compute_type: str, search: dict) -> None:
    """The worker: load one translator, then answer lists of texts until it receives None."""
    import ctranslate2
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=spm_path)
    translator = ctranslate2.Translator(
        path, device="cpu", compute_type=compute_type, inter_threads=1,
        intra_threads=os.cpu_count(),
    )  # fmt: skip
    conn.send("ready")
    while True:
        try:
            texts = conn.recv()
        except EOFError:  # the benchmark's process ended without `close`
            return
        if texts is None:
            return
        start = time.perf_counter()
        tokens = processor.encode(texts, out_type=str)
        longest = max(len(t) for t in tokens)
        results = translator.translate_batch(
            tokens, beam_size=search["beam_size"], length_penalty=search["alpha"],
            max_batch_size=len(texts),
            max_decoding_length=min(longest + 1 + search["max_extra_length"], search["limit"]),
        )  # fmt: skip
        outputs = processor.decode([r.hypotheses[0] for r in results])
        conn.send(Timed(outputs, time.perf_counter() - start))


class Worker:
    """`worker(texts) -> Timed(translations, seconds)`: a CTranslate2 model directory `path`
    with SentencePiece `spm_path`, in `compute_type`, in a process of its own (spawned, so
    that nothing of this process's threads comes with it). `search`: beam_size, alpha,
    max_extra_length (outputs of at most the batch's longest source + that many pieces:
    CTranslate2 takes one limit a batch) and limit (the model's last position)."""

    def __init__(self, path: str, spm_path: str, compute_type: str, search: dict):
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(child, path, spm_path, compute_type, search), daemon=True
        )
        self._process.start()
        child.close()  # the worker's end: only the worker holds it now, so its exit ends recv
        try:
            ready = self._conn.recv()
        except EOFError:  # it died loading (its traceback is on stderr)
            ready = None
        if ready != "ready":
            self._process.join(timeout=10)
            raise RuntimeError(
                f"The CTranslate2 {compute_type} worker for {path!r} did not start "
                f"(exit code {self._process.exitcode})"
            )

    def __call__(self, texts) -> Timed:
        self._conn.send(list(texts))
        return self._conn.recv()

    def close(self) -> None:
        self._conn.send(None)
        self._process.join(timeout=10)
