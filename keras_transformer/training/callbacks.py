"""Callbacks of the training loop: tokens/s in the progress bar and in TensorBoard, learning
rate logging, checkpoints every N steps or minutes (keeping the last K), and a hard stop at
`train_steps` so a resumed run ends exactly where an uninterrupted one would, a time limit,
and `AgreeToStop`, which makes the workers of a multi-worker run stop after the same update.
`NonFiniteGuard` (from `nonfinite`) must come first in the list, `AgreeToStop` last."""

from __future__ import annotations

import logging
import sys
import time

import keras
import tensorflow as tf

from keras_transformer.training import checkpoints
from keras_transformer.training.nonfinite import NonFiniteGuard  # noqa: F401  (re-exported)

logger = logging.getLogger("keras_transformer")


def between_updates(optimizer) -> bool:
    """True between the micro-batches of an accumulated update (`GuardedAccumulatingAdam` with
    `accumulate_steps` > 1 holds part of the next update in its accumulators)."""
    pending = getattr(optimizer, "accumulated_micro_batches", None)
    return pending is not None and int(keras.ops.convert_to_numpy(pending)) != 0


class TrainingMonitor(keras.callbacks.Callback):
    """Adds `tokens_per_sec` and `lr` to the batch logs and writes them to TensorBoard.

    Two rates: `tokens_per_sec`, a moving average of the last steps' rates (progress bar, log
    line, TensorBoard), and `mean_tokens_per_sec`, all tokens over the time spent inside
    training steps (from each batch's begin to its end), the run's figure: evaluation, dev
    BLEU and checkpoint pauses between steps count in neither.

    Args:
        log_dir: TensorBoard directory for step-level scalars ("train_steps" run); None: no
            TensorBoard (non-chief workers).
        log_every_steps: interval of the scalars, and of a "step N/T" log line when the
            console is not a terminal (no live progress bar: batch jobs, pipes).
        total_steps: the run's `train_steps`, for the log line.

    Tokens come from the "tokens" metric (`TokenCount`), whose state Keras sums over replicas,
    so the rate is for the global batch.
    """

    def __init__(self, log_dir: str | None, log_every_steps: int = 20, total_steps: int = 0):
        super().__init__()
        self.log_every_steps = log_every_steps
        self.total_steps = total_steps
        self.log_lines = not sys.stdout.isatty()
        self.writer = tf.summary.create_file_writer(log_dir) if log_dir else None
        self._last_tokens = 0.0
        self._last_time = None
        self.total_tokens = 0.0
        self.tokens_per_sec = 0.0
        self.step_seconds = 0.0
        self._batch_start = None

    @property
    def mean_tokens_per_sec(self) -> float:
        """Target tokens per second of the steps so far (0 before the first)."""
        return self.total_tokens / self.step_seconds if self.step_seconds > 0 else 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._last_tokens = 0.0  # Keras resets metric state every epoch
        self._last_time = time.perf_counter()

    def on_train_batch_begin(self, batch, logs=None):
        self._batch_start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        logs = logs if logs is not None else {}
        tokens = float(logs.get("tokens", 0.0))  # waits for the step's result
        now = time.perf_counter()
        if self._batch_start is not None:
            self.step_seconds += now - self._batch_start
        new_tokens = max(tokens - self._last_tokens, 0.0)
        elapsed = max(now - self._last_time, 1e-9)
        self.tokens_per_sec = 0.9 * self.tokens_per_sec + 0.1 * (new_tokens / elapsed)
        if self.total_tokens == 0.0:
            self.tokens_per_sec = new_tokens / elapsed
        self.total_tokens += new_tokens
        self._last_tokens, self._last_time = tokens, now
        step = int(self.model.optimizer.iterations.numpy())
        lr = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        logs["tokens_per_sec"] = self.tokens_per_sec
        logs["lr"] = lr
        if step % self.log_every_steps or between_updates(self.model.optimizer):
            return
        if self.log_lines:
            logger.info(
                "step %d/%d: loss %.4f, lr %.3g, %.0f tokens/s", step, self.total_steps,
                float(logs.get("loss", float("nan"))), lr, self.tokens_per_sec,
            )  # fmt: skip
        if self.writer is None:
            return
        with self.writer.as_default(step=step):
            for name in ("loss", "accuracy", "perplexity", "tokens_per_sec", "lr"):
                if name in logs:
                    tf.summary.scalar(name, float(logs[name]))
        self.writer.flush()


class PeriodicCheckpoint(keras.callbacks.Callback):
    """Saves `ckpt-<step>.weights.h5` every `every_steps` steps or `every_minutes` minutes,
    whichever comes first, and at the end of training; keeps the last `keep`. A run killed at
    any point loses at most one interval. Non-finite weights raise `NonFiniteLossError`
    instead of being saved (`checkpoints.save_checkpoint`).

    Args:
        directory: checkpoint directory.
        every_steps: step interval.
        every_minutes: wall-clock interval.
        keep: checkpoints kept.
        is_chief: only the chief writes (multi-worker training). The others write nothing:
            the weights file is read from mirrored variables, which takes no collective op,
            so they need not take part (as they must in a `tf.train.Checkpoint` save).
        run: stored in every checkpoint (`checkpoints.checkpoint_run`): replicas, global batch.

    Attributes:
        last_path: the checkpoint this run wrote last (the chief's), else None.
    """

    def __init__(
        self,
        directory: str,
        every_steps: int,
        every_minutes: float,
        keep: int,
        is_chief=True,
        run: dict | None = None,
    ):
        super().__init__()
        self.directory = directory
        self.run = dict(run or {})
        self.last_path = None
        self.every_steps = every_steps
        self.every_seconds = every_minutes * 60.0
        self.keep = keep
        self.is_chief = is_chief
        self._last_step = None
        self._last_time = time.monotonic()

    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    def save(self, preempted: bool = False) -> None:
        """Write this step's checkpoint (unless written already); `preempted`: off the
        schedule, to resume from (`checkpoints.save_checkpoint`)."""
        step = self._step()
        if step == self._last_step:
            return
        if self.is_chief:
            self.last_path = checkpoints.save_checkpoint(
                self.model, self.directory, step, self.keep, self.run, preempted
            )
        self._last_step, self._last_time = step, time.monotonic()

    def on_train_begin(self, logs=None):
        self._last_step = self._step()
        self._last_time = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if between_updates(self.model.optimizer):
            return  # the accumulators hold part of an update: wait for its end
        step = self._step()
        due_steps = step % self.every_steps == 0
        due_time = time.monotonic() - self._last_time >= self.every_seconds
        if due_steps or due_time:
            self.save()

    def on_train_end(self, logs=None):
        self.save()


class StopAtStep(keras.callbacks.Callback):
    """Stops `fit` once the optimizer has made `train_steps` updates."""

    def __init__(self, train_steps: int):
        super().__init__()
        self.train_steps = train_steps

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.train_steps:
            self.model.stop_training = True


class StopAtTimeLimit(keras.callbacks.Callback):
    """Stops `fit` before an update that would end past `seconds` of wall clock since
    training began (evaluations and checkpoints between steps included).

    After each update it stops when the time elapsed plus that update's own duration (from
    its first micro-batch's begin to its end: evaluations between steps do not count as
    step time) reaches the limit. What runs after the stop (Keras' validation pass, the last
    dev evaluation, the final checkpoint) takes a few seconds more.

    Args:
        seconds: the limit.
        clock: a monotonic clock in seconds (tests pass a fake one).

    Attributes:
        stopped_at_step: the optimizer step at which the limit stopped training, else None.
    """

    def __init__(self, seconds: float, clock=time.perf_counter):
        super().__init__()
        if not seconds > 0:
            raise ValueError(f"seconds must be > 0. Received: seconds={seconds!r}")
        self.seconds = seconds
        self.clock = clock
        self.stopped_at_step = None
        self._started = None
        self._update_start = None

    def on_train_begin(self, logs=None):
        self._started = self.clock()
        self.stopped_at_step = None

    def on_train_batch_begin(self, batch, logs=None):
        if self._update_start is None:  # the first micro-batch of an update
            self._update_start = self.clock()

    def on_train_batch_end(self, batch, logs=None):
        if between_updates(self.model.optimizer):
            return
        now = self.clock()
        update_seconds = now - self._update_start
        self._update_start = None
        if now - self._started + update_seconds >= self.seconds:
            self.stopped_at_step = int(self.model.optimizer.iterations.numpy())
            self.model.stop_training = True


class AgreeToStop(keras.callbacks.Callback):
    """Makes the workers of a multi-worker run stop together: after every update, each
    worker's `stop_training` is summed over the cluster (one all-reduce of a scalar) and if any
    worker stopped, all stop after that same update.

    Without it, a stop that only some processes decide (the chief's dev-BLEU early stopping,
    each worker's own clock under a time limit) ends `fit` on those alone; the others go on
    into the next step's collective ops, which then fail ("Collective instance N expected
    type 0 and data_type 9 but got type 0 and data_type 1"). Must come last in the list, after
    every callback that may stop training.

    Args:
        strategy: the run's `tf.distribute` strategy (any; one all-reduce over its replicas).

    Attributes:
        stopped_by_peer_at_step: the update after which another worker's stop stopped this
            one, else None.
    """

    def __init__(self, strategy: tf.distribute.Strategy):
        super().__init__()
        self.strategy = strategy
        self.stopped_by_peer_at_step = None
        self._last_step = None

        def replica_sum(flag):  # () float32 on each replica -> the sum over all replicas
            return tf.distribute.get_replica_context().all_reduce("SUM", tf.identity(flag))

        self._sum = tf.function(lambda flag: strategy.run(replica_sum, args=(flag,)))

    def any_stopped(self, stopped: bool) -> bool:
        """Whether any replica's process passed `stopped=True` (a collective: every worker
        must call it at the same point)."""
        with self.strategy.scope():
            total = self._sum(tf.constant(1.0 if stopped else 0.0))
        return float(self.strategy.experimental_local_results(total)[0]) > 0

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if between_updates(self.model.optimizer) or step == self._last_step:
            return
        self._last_step = step
        stopped = bool(self.model.stop_training)
        if self.any_stopped(stopped) and not stopped:
            self.stopped_by_peer_at_step = step
            self.model.stop_training = True
            logger.info("Stopping at step %d: another worker stopped training", step)
