"""A system in a process of its own that answers requests over a pipe and times them itself.

`benchmarks.ctranslate2_process` (CTranslate2: two translators in one process slow each
other ~10x) and `benchmarks.savedmodel_process` (our export with TensorFlow's thread pools
set, which is once per process) start one `ProcessWorker` per system. The request is timed
in the worker, so the pipe between the processes is not counted.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import NamedTuple
from unittest import mock


class Timed(NamedTuple):
    """A system's outputs with the seconds it measured itself."""

    outputs: list
    seconds: float


def serve_requests(conn, handle) -> None:
    """A worker's loop once it has loaded: "ready", then each `(kind, payload)` answered with
    `Timed(handle(kind, payload), the seconds handle took)` until None (or until the
    benchmark's process ends without `close`)."""
    conn.send("ready")
    while True:
        try:
            message = conn.recv()
        except EOFError:  # the benchmark's process ended without `close`
            return
        if message is None:
            return
        start = time.perf_counter()
        outputs = handle(*message)
        conn.send(Timed(outputs, time.perf_counter() - start))


class ProcessWorker:
    """`worker(texts) -> Timed(translations, seconds)`: `target(conn, *args)` run in a spawned
    process (nothing of this process's threads comes with it), which sends "ready" once
    loaded, then answers each `("texts", texts)` (or another kind it knows) with a `Timed`
    until it receives None. `what` names the worker in the error raised when it does not
    start (its traceback is on stderr). `env`: environment variables the process starts
    with (this process's own are as before once it has started)."""

    def __init__(self, target, args: tuple, what: str, env: dict | None = None):
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=target, args=(child, *args), daemon=True)
        with mock.patch.dict(os.environ, env or {}):  # the child starts with these, then undone
            self._process.start()
        child.close()  # the worker's end: only the worker holds it now, so its exit ends recv
        try:
            ready = self._conn.recv()
        except EOFError:  # it died loading
            ready = None
        if ready != "ready":
            self._process.join(timeout=10)
            raise RuntimeError(f"The {what} did not start (exit code {self._process.exitcode})")

    def request(self, kind: str, payload) -> Timed:
        self._conn.send((kind, payload))
        return self._conn.recv()

    def __call__(self, texts) -> Timed:
        return self.request("texts", list(texts))

    def close(self) -> None:
        self._conn.send(None)
        self._process.join(timeout=10)
