"""Exceptions of a training run (no TensorFlow import, so entry scripts can catch them cheaply)."""

from __future__ import annotations

import re

PREEMPTED_STATUS = 143  # 128 + SIGTERM: a shell's status for a process that SIGTERM ended
NONFINITE_STATUS = 3  # a non-finite loss: rerunning resumes from the last good checkpoint
WORKER_LOST_STATUS = 4  # another worker of a cluster stopped: restart all workers


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
        cluster: TF_CONFIG's "cluster" (`{"worker": ["host:port", ...], ...}`), to name the
            lost task from an address when the message gives only that.

    Attributes:
        lost_task: "worker 0 (127.0.0.1:4711)" as far as the message tells, else None.
    """

    def __init__(
        self, step: int, last_checkpoint: str | None, cause: str, cluster: dict | None = None
    ):
        self.step = step
        self.last_checkpoint = last_checkpoint
        self.lost_task = lost_task(cause, cluster or {})
        which = f"{self.lost_task} stopped" if self.lost_task else "a task of the cluster stopped"
        super().__init__(
            f"{which} at about step {step} ({_status_line(cause)}); restart every task with "
            f"the same command to resume from {last_checkpoint or 'the start'}"
        )


# Where TensorFlow's collective errors name the other task: a gRPC call's remote target (a
# killed chief, seen from a worker), the coordination service's unhealthy-task list (a killed
# worker, seen from the chief), the task that reported the error.
LOST_TASK_PATTERNS = (
    r"remote target /job:(\w+)/replica:\d+/task:(\d+)",
    r"unhealthy[^\n]*\n\s*/job:(\w+)/replica:\d+/task:(\d+)",
    r"Error reported from /job:(\w+)/(?:replica:\d+/)?task:(\d+)",
)


def lost_task(cause: str, cluster: dict) -> str | None:
    """The task a collective's error names ("remote target /job:worker/replica:0/task:1", or
    a peer's "ipv4:HOST:PORT" looked up in `cluster`), as "worker 1 (HOST:PORT)", else None."""
    # Not the first "/job:" of the message: that may be this worker's own device.
    named = None
    for pattern in LOST_TASK_PATTERNS:
        named = named or re.search(pattern, cause)
    address = re.search(r"ipv4:([\w.\-]+:\d+)", cause)
    addresses = {
        f"{job} {i}": host for job, hosts in cluster.items() for i, host in enumerate(hosts)
    }
    if named:
        task = f"{named.group(1)} {named.group(2)}"
        host = addresses.get(task) or (address.group(1) if address else None)
        return f"{task} ({host})" if host else task
    if address:
        found = [task for task, host in addresses.items() if host.endswith(address.group(1))]
        return f"{found[0]} ({address.group(1)})" if found else address.group(1)
    return None


def _status_line(cause: str) -> str:
    """The line of TensorFlow's message with the status (UNAVAILABLE: ...), else its first."""
    cause = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", cause)  # the op's internal name
    lines = [line.strip() for line in cause.strip().splitlines() if line.strip()]
    for line in lines:
        match = re.search(
            r"(\b(UNAVAILABLE|ABORTED|DEADLINE_EXCEEDED|CANCELLED|INTERNAL):|Collective ops is "
            r"aborted by:|tasks are unhealthy).*",
            line,
        )
        if match:
            return match.group(0)[:200]
    return lines[0][:200] if lines else "unknown cause"


class PreemptedError(RuntimeError):
    """The run received SIGTERM or SIGINT and stopped after the update in flight, with a
    checkpoint at that step (`training.preemption.SignalWatch`).

    Args:
        step: the update the run stopped after.
        last_checkpoint: the checkpoint written at `step` (the chief's), or the latest on disk.
        signal_name: "SIGTERM", "SIGINT", or "another worker's signal".
    """

    def __init__(self, step: int, last_checkpoint: str | None, signal_name: str):
        self.step = step
        self.last_checkpoint = last_checkpoint
        self.signal_name = signal_name
        super().__init__(
            f"stopped by {signal_name} after step {step}; checkpoint "
            f"{last_checkpoint or '(none: no update made)'}; run the same command again to "
            "resume from it"
        )


def exit_status(error: BaseException) -> int | None:
    """The exit status of a training command that `error` ended (`PREEMPTED_STATUS`,
    `NONFINITE_STATUS`, `WORKER_LOST_STATUS`), or None for an error that is not a run's."""
    statuses = {
        PreemptedError: PREEMPTED_STATUS,
        NonFiniteLossError: NONFINITE_STATUS,
        WorkerLostError: WORKER_LOST_STATUS,
    }
    return next((code for kind, code in statuses.items() if isinstance(error, kind)), None)
