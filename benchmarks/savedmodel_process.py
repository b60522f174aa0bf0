"""Our SavedModel's `serving_default` in a process of its own, with TensorFlow's thread pools
set as a server sets them (TF Serving: `--tensorflow_intra_op_parallelism` and
`--tensorflow_inter_op_parallelism`).

TensorFlow sizes its thread pools once per process, so `serving single --our-threads` runs
each thread count in a `Worker` of its own, as CTranslate2's `intra_threads` are run
(`benchmarks.ctranslate2_process`). The worker sets glibc's malloc as the package's commands
do, and times each request itself: the string tensor made, `serving_default` called, the
translations read back (what the in-process systems' timing covers).
"""

from __future__ import annotations

from benchmarks.process_worker import ProcessWorker, serve_requests

# TensorFlow sizes its intra-op and inter-op pools from these when it starts, so they are set
# in the worker's environment before it runs: `tf.config.threading` cannot size them once
# anything has started TensorFlow, which a spawned process's re-import of the caller's main
# module may do.
POOLS = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def _serve(conn, export_dir: str):
    """The worker: the export loaded, then `("texts", texts)` -> `Timed(translations as str,
    seconds)` until None (`process_worker.serve_requests`)."""
    from keras_transformer import malloc

    malloc.keep_freed_memory()
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's SentencePiece ops)

    signature = tf.saved_model.load(export_dir).signatures["serving_default"]

    def translate(_, texts):
        translations = signature(text=tf.constant(texts))["translations"].numpy()
        return [t.decode() for t in translations]

    serve_requests(conn, translate)


class Worker(ProcessWorker):
    """`worker(texts) -> Timed(translations, seconds)`: `serving_default` of the export
    `export_dir`, TensorFlow's intra-op and inter-op pools at `threads`, in a process of its
    own."""

    def __init__(self, export_dir: str, threads: int):
        if threads < 1:
            raise ValueError(f"threads must be at least 1. Received: {threads}")
        super().__init__(
            _serve, (export_dir,), f"SavedModel worker for {export_dir!r}",
            env={name: str(threads) for name in POOLS},
        )  # fmt: skip
