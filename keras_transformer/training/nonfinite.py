"""Guard against non-finite losses and gradients: no update, no checkpoint and no export is
ever made from non-finite values.

- The optimizer (`optimizer.GuardedAccumulatingAdam`) checks every step's gradients on all
  replicas and skips a step with a NaN or Inf gradient, counting it in
  `optimizer.nonfinite_steps`.
- `NonFiniteGuard` (the first callback) turns such a step, or a non-finite loss, into a
  `NonFiniteLossError` that names the step and the last good checkpoint, unless the run allows
  `skip_nonfinite_batches` bad batches, in which case it logs the skip and goes on.
- Under float16 loss scaling an overflowing update is normal: the optimizer lowers the scale,
  skips the update and counts it in `optimizer.loss_scale_skips`, not in `nonfinite_steps`;
  the guard logs it as a loss-scale event and goes on, whatever `skip_nonfinite_batches`.
- `check_finite` is called before any weights file is written.
"""

from __future__ import annotations

import logging
import math

import keras
import numpy as np

from keras_transformer.training.errors import NonFiniteLossError

logger = logging.getLogger("keras_transformer")


def check_finite(variables, step: int, last_checkpoint: str | None, what: str = "weights"):
    """Raise `NonFiniteLossError` if any of `variables` holds a NaN or Inf."""
    for variable in variables:
        if not np.isfinite(keras.ops.convert_to_numpy(variable)).all():
            raise NonFiniteLossError(step, last_checkpoint, what=f"{what} ({variable.path})")


class NonFiniteGuard(keras.callbacks.Callback):
    """Stops training at the first non-finite loss or gradient, or skips up to `max_skipped`.

    Must come first in the callback list, so no other callback (checkpoints, logs) acts on a
    bad step before it. A skipped batch was not applied (`optimizer.GuardedAccumulatingAdam`);
    the guard resets the running metrics so the epoch's loss does not stay NaN.

    Args:
        max_skipped: non-finite batches that may be skipped over the whole run (resumes
            included: checkpoints save the count).
        last_checkpoint: callable returning the latest checkpoint path (for the message).
    """

    def __init__(self, max_skipped: int, last_checkpoint):
        super().__init__()
        self.max_skipped = max_skipped
        self.last_checkpoint = last_checkpoint
        self._seen = 0
        self._scale_skips = None  # the optimizer's loss_scale_skips when last seen

    def _counter(self):
        return getattr(self.model.optimizer, "nonfinite_steps", None)

    def on_train_begin(self, logs=None):
        counter = self._counter()
        self._seen = int(keras.ops.convert_to_numpy(counter)) if counter is not None else 0
        self._scale_skips = self._loss_scale_skips()

    def _loss_scale_skips(self) -> int | None:
        counter = getattr(self.model.optimizer, "loss_scale_skips", None)
        return None if counter is None else int(keras.ops.convert_to_numpy(counter))

    def _log_loss_scale_event(self) -> None:
        """An update the loss scaler skipped (float16 overflow): logged, not a bad batch."""
        skips = self._loss_scale_skips()
        if skips is None or skips == self._scale_skips:
            return
        self._scale_skips = skips
        optimizer = self.model.optimizer
        logger.info(
            "Loss scale lowered to %g at step %d: float16 gradients overflowed, update skipped "
            "(loss-scale event %d; not counted in --skip-nonfinite-batches)",
            float(keras.ops.convert_to_numpy(optimizer.loss_scale)),
            int(keras.ops.convert_to_numpy(optimizer.iterations)), skips,
        )  # fmt: skip

    def on_train_batch_end(self, batch, logs=None):
        self._log_loss_scale_event()
        counter = self._counter()
        seen = int(keras.ops.convert_to_numpy(counter)) if counter is not None else self._seen
        loss = (logs or {}).get("loss")
        loss_bad = loss is not None and not math.isfinite(float(loss))
        if seen == self._seen and not loss_bad:
            return
        if seen == self._seen:  # a non-finite loss with finite gradients: count it too
            seen += 1
            if counter is not None:
                counter.assign(seen)
        self._seen = seen
        step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        if seen > self.max_skipped:
            self.model.stop_training = True
            raise NonFiniteLossError(step, self.last_checkpoint())
        logger.warning(
            "Non-finite loss or gradients at step %d: batch skipped, no update applied "
            "(%d of at most %d skipped batches)", step, seen, self.max_skipped,
        )  # fmt: skip
        self.model.reset_metrics()
