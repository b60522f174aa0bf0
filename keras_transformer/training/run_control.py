"""The one callback of a training run: after each update it calls the run's parts in the
order this code writes them.

    control = RunControl(run_end, checkpoint, signals, guard=guard, progress=progress,
                         evaluator=evaluator, strategy=None)
    model.fit(..., callbacks=[control], verbose=0)

After every update (a micro-batch that completes an accumulated update, or every batch):

1. the non-finite guard (`training.nonfinite.NonFiniteGuard`): a non-finite loss or
   gradient raises, or is skipped, before anything is saved or measured from it;
2. the run end reads the clock at the update's end (`training.run_end.RunEnd`: the plan, the
   step count, the time limit);
3. the progress log (`training.callbacks.ProgressLog`);
4. the checkpoint (`training.callbacks.PeriodicCheckpoint`);
5. the dev evaluation handed down by the caller (an `Evaluator`; the chief's only), which
   may ask the run end for an early stop;
6. the end: one agreement over the workers of a multi-worker run (one all-reduce of two
   flags: a stop, a signal), then a signal's checkpoint and `PreemptedError`
   (`training.preemption.SignalWatch`), or the run end's stop.
"""

from __future__ import annotations

from typing import Protocol

import keras
import tensorflow as tf

from keras_transformer.tracing import graph_function
from keras_transformer.training.callbacks import PeriodicCheckpoint, ProgressLog, between_updates
from keras_transformer.training.preemption import SignalWatch
from keras_transformer.training.run_end import RunEnd


class Evaluator(Protocol):
    """An evaluation that training runs every `every_steps` updates and at its end, in the
    chief's process only (`keras_transformer.decoding.dev_evaluation.DevEvaluator`)."""

    every_steps: int

    def start(self) -> None:
        """Training begins (the clock of the records' minutes)."""

    def evaluate(self, model: keras.Model, step: int) -> dict:
        """Evaluate `model` after update `step`; returns the record."""

    def should_stop(self) -> bool:
        """Whether the evaluations so far ask to stop training (early stopping)."""


class Agreement:
    """Whether any replica's process raised each flag: one all-reduce (a sum) of a float32
    vector over the strategy's replicas; every worker must call it at the same point.

    Without it, a stop that only some processes decide (the chief's early stopping, each
    worker's own clock under a time limit, one worker's signal) ends `fit` on those alone;
    the others go on into the next step's collective ops, which then fail ("Collective
    instance N expected type 0 and data_type 9 but got type 0 and data_type 1").
    """

    def __init__(self, strategy: tf.distribute.Strategy):
        self.strategy = strategy

        def replica_sum(flags):  # (n,) float32 on each replica -> the sum over all replicas
            return tf.distribute.get_replica_context().all_reduce("SUM", tf.identity(flags))

        self._sum = graph_function(lambda flags: strategy.run(replica_sum, args=(flags,)))

    def __call__(self, *flags: bool) -> tuple[bool, ...]:
        with self.strategy.scope():
            total = self._sum(tf.constant([1.0 if flag else 0.0 for flag in flags]))
        values = self.strategy.experimental_local_results(total)[0].numpy()
        return tuple(bool(value > 0) for value in values)


class RunControl(keras.callbacks.Callback):
    """Calls a run's parts after every update, in the module docstring's order.

    Args:
        run_end: when the run ends (the only part that stops `fit` for a normal end).
        checkpoint: the run's checkpoints (its `save` writes on the chief only).
        signals: SIGTERM/SIGINT handling (None: none).
        guard: the non-finite guard (a Keras callback; None: none).
        progress: the progress log (None: none).
        evaluator: the dev evaluation (None: none; give it to the chief only).
        strategy: a `MultiWorkerMirroredStrategy` whose workers must agree on stops and
            signals, else None (one process decides alone: no collective op).
    """

    def __init__(
        self,
        run_end: RunEnd,
        checkpoint: PeriodicCheckpoint,
        signals: SignalWatch | None = None,
        guard: keras.callbacks.Callback | None = None,
        progress: ProgressLog | None = None,
        evaluator: Evaluator | None = None,
        strategy: tf.distribute.Strategy | None = None,
    ):
        super().__init__()
        self.run_end = run_end
        self.checkpoint = checkpoint
        self.signals = signals
        self.guard = guard
        self.progress = progress
        self.evaluator = evaluator
        self.agreement = Agreement(strategy) if strategy is not None else None
        self._last_step = None
        self._in_update = False

    def set_model(self, model):
        super().set_model(model)
        for part in (self.guard, self.checkpoint):
            if part is not None:
                part.set_model(model)

    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    def on_train_begin(self, logs=None):
        self._last_step = self._step()
        if self.guard is not None:
            self.guard.on_train_begin(logs)
        self.run_end.begin(self._last_step)
        self.checkpoint.on_train_begin(logs)
        if self.evaluator is not None:
            self.evaluator.start()
        if self.signals is not None:
            self.signals.install()

    def on_epoch_begin(self, epoch, logs=None):
        if self.progress is not None:
            self.progress.epoch_begins()

    def on_train_batch_begin(self, batch, logs=None):
        if self._in_update:
            return  # a later micro-batch of an accumulated update
        self._in_update = True
        self.run_end.update_begins(self._step())
        if self.progress is not None:
            self.progress.update_begins()

    def on_train_batch_end(self, batch, logs=None):
        logs = logs if logs is not None else {}
        if self.guard is not None:
            self.guard.on_train_batch_end(batch, logs)
        if between_updates(self.model.optimizer):
            return  # within an accumulated update
        self._in_update = False
        step = self._step()
        if step == self._last_step:
            return  # a skipped (non-finite) batch: no update
        self._last_step = step
        self.run_end.update_ends(step)
        if self.progress is not None:
            self.progress.update_ends(step, logs, self.run_end.total_steps, self.model.optimizer)
        self.checkpoint.on_train_batch_end(batch, logs)
        if self.evaluator is not None and step % self.evaluator.every_steps == 0:
            self.evaluator.evaluate(self.model, step)
            if self.evaluator.should_stop():
                self.run_end.request("early_stopping", step)
        self._stop_or_go_on(step)

    def _stop_or_go_on(self, step: int) -> None:
        stop = self.run_end.stopping
        signalled = self.signals is not None and self.signals.received is not None
        if self.agreement is not None:
            stop, signalled = self.agreement(stop, signalled)
        if signalled:
            self.signals.preempt(self.checkpoint, step)
        if stop:
            self.run_end.stop(self.model, step)

    def on_epoch_end(self, epoch, logs=None):
        """The token count is a counter for tokens/s, not a figure of an epoch: it leaves
        the epoch's logs (Keras' history, TensorBoard, `summary.json`) here."""
        logs = logs if logs is not None else {}
        for name in ("tokens", "val_tokens"):
            logs.pop(name, None)
        if self.progress is not None:
            self.progress.validation_ends(self._step(), logs)

    def on_train_end(self, logs=None):
        self.checkpoint.on_train_end(logs)
        if self.evaluator is not None:
            self.evaluator.evaluate(self.model, self._step())  # none twice for one step
        if self.signals is not None:
            self.signals.uninstall()
