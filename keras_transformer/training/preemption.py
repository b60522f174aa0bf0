"""Preemption: on SIGTERM (a cloud machine's notice) or SIGINT (Ctrl-C) the run finishes the
update in flight, writes a checkpoint at that step and stops, within a grace period; running
the same command again resumes from that checkpoint, to the weights an uninterrupted run
ends with.

Why a callback and not `tf.distribute.experimental.PreemptionCheckpointHandler`: that handler
drives a custom training loop (`handler.run(step_fn)`) and saves a `tf.train.Checkpoint`,
and its docs support MultiWorkerMirroredStrategy and TPUStrategy only. Our runs are Keras'
`fit` under every strategy, with checkpoints in `training.checkpoints`' layout (weights,
optimizer and dropout RNG state in one file, written atomically); Keras 3's `BackupAndRestore`
has no save-on-signal. So the handler only records the signal (Python runs it between two
ops, never inside a step), and the run control (`training.run_control.RunControl`) acts at
the next update boundary: workers of a multi-worker run agree on the flag (the run control's
one all-reduce per update), so all stop after the same update and the chief writes that
step's checkpoint.

If the grace period ends first (a step, or gradient accumulation's remaining micro-batches,
or a dev evaluation, longer than the notice), a watchdog ends the process with the same exit
status, as does a second Ctrl-C: the rerun resumes from the latest checkpoint,
as after a kill. Python runs the handler when the main thread next runs Python code, i.e.
after the TensorFlow op in flight (at most a step): the grace period counts from there.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable

from keras_transformer.artifacts import latest_checkpoint_in
from keras_transformer.training.callbacks import PeriodicCheckpoint
from keras_transformer.training.errors import PREEMPTED_STATUS, PreemptedError

logger = logging.getLogger("keras_transformer")

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class SignalWatch:
    """Records the first of `signals` this process receives; `preempt` then ends the run.

    Args:
        grace_seconds: from the signal to the process's end at most; past it a watchdog
            calls `exit_fn(PREEMPTED_STATUS)`.
        signals: the signals handled (installed by `install`, in the main thread only; the
            previous handlers come back with `uninstall` or `preempt`).
        exit_fn: the watchdog's exit (tests pass their own).

    Attributes:
        received: the signal number, once one came, else None.
    """

    def __init__(
        self,
        grace_seconds: float,
        signals=SIGNALS,
        exit_fn: Callable[[int], None] = os._exit,
    ):
        if not grace_seconds > 0:
            raise ValueError(
                f"grace_seconds must be > 0. Received: grace_seconds={grace_seconds!r}"
            )
        self.grace_seconds = grace_seconds
        self.signals = tuple(signals)
        self.exit_fn = exit_fn
        self.received = None
        self._previous = {}
        self._watchdog = None

    def _handle(self, signum, frame) -> None:
        if self.received is not None:
            if signum == self.received == signal.SIGINT:  # Ctrl-C twice: stop now
                logger.error("Second Ctrl-C: exiting now with status %d", PREEMPTED_STATUS)
                self.exit_fn(PREEMPTED_STATUS)
            return  # e.g. a launcher's SIGTERM after the terminal's SIGINT: already stopping
        self.received = signum
        logger.warning(
            "Received %s: finishing the current update, then writing a checkpoint and "
            "stopping (grace period %gs).", signal.Signals(signum).name, self.grace_seconds,
        )  # fmt: skip
        self._watchdog = threading.Timer(self.grace_seconds, self._grace_over)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _grace_over(self) -> None:
        logger.error(
            "The %gs grace period ended before the run stopped: exiting with status %d; "
            "rerunning resumes from the latest checkpoint.", self.grace_seconds,
            PREEMPTED_STATUS,
        )  # fmt: skip
        self.exit_fn(PREEMPTED_STATUS)

    def install(self) -> None:
        """Handle `signals` from now on (training begins)."""
        if threading.current_thread() is not threading.main_thread():
            return  # Python takes signal handlers in the main thread only
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        """Stop the watchdog and give the previous handlers back (training ends)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def preempt(self, checkpoint: PeriodicCheckpoint, step: int) -> None:
        """Write update `step`'s checkpoint through `checkpoint` (the chief's) and raise
        `PreemptedError`: this process's signal, or (none received here) another worker's."""
        checkpoint.save(preempted=True)
        self.uninstall()  # stopped in time: the caller decides what comes next
        local = self.received is not None
        name = signal.Signals(self.received).name if local else "another worker's signal"
        last = checkpoint.last_path or latest_checkpoint_in(checkpoint.directory)
        raise PreemptedError(step, last, name)
