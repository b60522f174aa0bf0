"""The parts of a training run's control (`training.run_control.RunControl` calls them in
order): the progress log (one line every N updates, one per validation pass, TensorBoard
scalars) and the checkpoints every N steps or minutes (keeping the last K)."""

from __future__ import annotations

import logging
import time

import keras
import tensorflow as tf

from keras_transformer.training import checkpoints

logger = logging.getLogger("keras_transformer")


def between_updates(optimizer) -> bool:
    """True between the micro-batches of an accumulated update (`GuardedAccumulatingAdam` with
    `accumulate_steps` > 1 holds part of the next update in its accumulators)."""
    pending = getattr(optimizer, "accumulated_micro_batches", None)
    return pending is not None and int(keras.ops.convert_to_numpy(pending)) != 0


class ProgressLog:
    """The run's one progress display: a log line every `every_steps` updates,

        step 20 (planning the budget): loss 7.1234, lr 0.000316, 5104 tokens/s
        step 120/3350: loss 5.0311, lr 0.00189, 5230 tokens/s

    (the total once it is known), one line per validation pass, and the same scalars in
    TensorBoard. Keras' own progress printing is off (`fit(verbose=0)`).

    Tokens come from the compiled "tokens" metric (`TokenCount`: non-padding target tokens
    since the epoch began, summed over replicas, so the rate is the global batch's). A line's
    rate is its interval's tokens over the time spent inside its updates (from an update's
    first micro-batch's begin to its end): evaluations, validation passes and checkpoints
    between updates count in no rate. `mean_tokens_per_sec` is the same over the whole run.

    Args:
        log_dir: TensorBoard directory of the step scalars; None: none (non-chief workers).
        every_steps: updates between lines and scalars.
        clock: `time.perf_counter`-like (tests pass a fake one).
    """

    def __init__(self, log_dir: str | None, every_steps: int = 20, clock=time.perf_counter):
        self.every_steps = every_steps
        self.clock = clock
        self.writer = tf.summary.create_file_writer(log_dir) if log_dir else None
        self.total_tokens = 0.0
        self.step_seconds = 0.0
        self._epoch_tokens = 0.0  # the metric's value at the last update end
        self._interval = [0.0, 0.0]  # tokens, seconds since the last line
        self._update_start = None

    @property
    def mean_tokens_per_sec(self) -> float:
        """Target tokens per second of the updates so far (0 before the first)."""
        return self.total_tokens / self.step_seconds if self.step_seconds > 0 else 0.0

    def epoch_begins(self) -> None:
        self._epoch_tokens = 0.0  # Keras resets metric state every epoch

    def update_begins(self) -> None:
        self._update_start = self.clock()

    def update_ends(self, step: int, logs: dict, total_steps: int | None, optimizer) -> None:
        """Count update `step`'s tokens and time; every `every_steps` updates, one line with
        `total_steps` (None: not known yet) and `optimizer`'s learning rate."""
        tokens = float(logs.get("tokens", 0.0))  # waits for the update's result
        seconds = self.clock() - self._update_start
        new_tokens = max(tokens - self._epoch_tokens, 0.0)
        self._epoch_tokens = tokens
        self.total_tokens += new_tokens
        self.step_seconds += seconds
        self._interval = [self._interval[0] + new_tokens, self._interval[1] + seconds]
        if step % self.every_steps:
            return
        rate = self._interval[0] / self._interval[1] if self._interval[1] > 0 else 0.0
        self._interval = [0.0, 0.0]
        where = f"{step}/{total_steps}" if total_steps else f"{step} (planning the budget)"
        loss = float(logs.get("loss", float("nan")))
        lr = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        logger.info("step %s: loss %.4f, lr %.3g, %.0f tokens/s", where, loss, lr, rate)
        scalars = {"tokens_per_sec": rate, "lr": lr}
        scalars.update({k: logs[k] for k in ("loss", "accuracy", "perplexity") if k in logs})
        self._write(step, scalars)

    def validation_ends(self, step: int, logs: dict) -> None:
        """One line for the validation pass after update `step` (its `val_*` logs)."""
        found = {k[4:]: float(v) for k, v in logs.items() if k.startswith("val_")}
        if found:
            figures = ", ".join(f"{name} {value:.4f}" for name, value in found.items())
            logger.info("step %d: validation %s", step, figures)

    def _write(self, step: int, scalars: dict) -> None:
        if self.writer is None:
            return
        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, float(value))
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
