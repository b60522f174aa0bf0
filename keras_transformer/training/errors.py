"""Exceptions of a training run (no TensorFlow import, so entry scripts can catch them cheaply)."""

from __future__ import annotations


class NonFiniteLossError(RuntimeError):
    """Training met a non-finite loss, gradient or weight; nothing was saved from it.

    Args:
        step: optimizer step (updates made, skipped ones included) where it happened.
        last_checkpoint: path of the latest (finite) checkpoint on disk, or None.
        what: what was not finite ("loss or gradients", "weights (path)").
    """

    def __init__(self, step: int, last_checkpoint: str | None, what: str = "loss or gradients"):
        self.step = step
        self.last_checkpoint = last_checkpoint
        resume = (
            f"last good checkpoint: {last_checkpoint}, rerunning resumes from it"
            if last_checkpoint
            else "no checkpoint written yet, rerunning starts afresh"
        )
        super().__init__(
            f"non-finite {what} at step {step}: training stopped, nothing saved from it "
            f"({resume}; lower --learning-rate-scale or allow --skip-nonfinite-batches N)"
        )


class WorkerLostError(RuntimeError):
    """Another task of a multi-worker cluster stopped: training cannot go on without it.

    Args:
        step: the step this worker had reached.
        last_checkpoint: the chief's latest checkpoint (all workers resume from it), or None.
        cause: TensorFlow's message.
    """

    def __init__(self, step: int, last_checkpoint: str | None, cause: str):
        self.step = step
        self.last_checkpoint = last_checkpoint
        first_line = cause.strip().splitlines()[0] if cause.strip() else "unknown cause"
        super().__init__(
            f"a task of the cluster stopped at about step {step} ({first_line}); restart every "
            f"task with the same command to resume from {last_checkpoint or 'the start'}"
        )
