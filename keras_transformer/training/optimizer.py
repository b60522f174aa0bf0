"""The training run's optimizer: the paper's Adam (Keras' `keras.optimizers.Adam`) guarded
against non-finite gradients, accumulating gradients over micro-batches and, under float16,
scaling the loss.

    optimizer = GuardedAccumulatingAdam(schedule, 0.9, 0.98, 1e-9, accumulate_steps=4)
    optimizer = GuardedAccumulatingAdam(schedule, 0.9, 0.98, 1e-9, initial_loss_scale=2.0**15)

- Guarded: every step's gradients are checked (on all replicas) before they are applied; a
  step with a NaN or Inf gradient leaves weights and moments as they were and is counted in
  `optimizer.nonfinite_steps` (a variable that checkpoints save). The step still counts in
  `iterations`, so the learning-rate schedule and the data position move on.
  `nonfinite.NonFiniteGuard` turns the count into a stop or a logged skip.
- Accumulating: with `accumulate_steps=K`, K micro-batches make one update with the mean of
  their gradients; `iterations` and the schedule count updates. A non-finite micro-batch adds
  zeros (the update averages the others' gradients over K).
- Loss-scaling (`initial_loss_scale`, for mixed_float16): Keras' dynamic loss scaling, with the
  finiteness decision of the guard, agreed by all replicas and workers (Keras'
  `LossScaleOptimizer` decides per replica). A skip at a scale above `MIN_LOSS_SCALE` is a
  loss-scale event (`loss_scale_skips`), normal under float16, not a non-finite step.

Without accumulation its variables are those of `keras.optimizers.Adam` (the skip counters and
the loss scale are kept out of them, in the checkpoint's training_state:
`GuardedAccumulatingAdam.checkpoint_state`), so a checkpoint loads into either, at any precision.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.checks import check_int, check_number

# Keras' LossScaleOptimizer's defaults: start high (a scale too high is lowered far faster than
# one too low is raised), double after 2000 finite steps.
INITIAL_LOSS_SCALE = 2.0**15
LOSS_SCALE_GROWTH_STEPS = 2000
# The scale is never lowered below 1: a non-finite update at scale 1 is the gradients' own
# overflow, not the scaling's, and counts as a non-finite step (`nonfinite.NonFiniteGuard`).
MIN_LOSS_SCALE = 1.0


def _any_replica(flag):
    """True on every replica if the bool scalar `flag` is True on any replica (or worker)."""
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return flag
    count = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(flag, tf.float32))
    return count > 0.0


@keras.saving.register_keras_serializable(package="keras_transformer")
class GuardedAccumulatingAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` that skips a step whose gradients are not all finite,
    accumulates gradients over `accumulate_steps` micro-batches and, with
    `initial_loss_scale`, scales the loss dynamically (mixed_float16).

    Args:
        accumulate_steps: K, micro-batches per update (1: none).
        initial_loss_scale: the loss scale to start from (`INITIAL_LOSS_SCALE` under
            mixed_float16), or None: no loss scaling.
        loss_scale_growth_steps: finite calls in a row after which the scale doubles.
        *args, **kwargs: those of `keras.optimizers.Adam`.

    A skipped step leaves weights and moments as they were, adds one to `iterations` (the
    schedule and the data position move on) and to `nonfinite_steps` (int64, saved in the
    checkpoint's training_state). Under `tf.distribute` the check is reduced over all replicas
    and workers first, so all skip the same steps; the one `cond` around the whole update
    follows Keras' `LossScaleOptimizer` (a `cond` in a replica context cannot hold the
    `merge_call` of MirroredStrategy's update). A sparse gradient (an embedding lookup's
    `IndexedSlices`) is made dense first: the paper's Adam of the summed gradient, where
    Keras' sparse update would square repeated rows before summing them.

    Gradient accumulation (`accumulate_steps` K > 1): each replica adds its micro-batch
    gradients to its own accumulators (`accumulated_gradient` optimizer variables, saved in
    checkpoints); every K-th call applies Adam to (accumulated + current) / K, which the
    all-reduce of a normal step turns into the mean over replicas and micro-batches, and resets
    them. `accumulated_micro_batches` counts the calls since the last update (0 at an update
    boundary: checkpoints wait for it). Keras' own `gradient_accumulation_steps` is not used: it
    branches around a `merge_call`, which MirroredStrategy refuses, and counts micro-batches in
    the step the learning-rate schedule sees; here the branch is taken in the cross-replica
    context, as for a skipped step.

    Loss scaling (`initial_loss_scale` set): `scale_loss`, which Keras' train step calls,
    multiplies the loss by `loss_scale` (float32); `apply` divides each replica's gradients
    by it before the check, so the check, the accumulators and Adam see unscaled float32
    gradients. A non-finite call (on any replica or worker: the one agreed flag) is skipped as
    above, halves the scale (not below `MIN_LOSS_SCALE`) and counts in `loss_scale_skips`
    instead of `nonfinite_steps` (at `MIN_LOSS_SCALE`: in `nonfinite_steps`); after
    `loss_scale_growth_steps` finite calls in a row the scale doubles. `loss_scale`,
    `loss_scale_skips` and `loss_scale_finite_steps` are saved in the checkpoint's
    training_state, so a resume goes on with the same scale. Compile with
    `auto_scale_loss=False` (`trainer.compile_model`), or Keras wraps it in its own
    `LossScaleOptimizer`, whose check is per replica, before the all-reduce: under
    MirroredStrategy replica 0's flag decides for all (an overflow on another replica reaches
    every weight and the scale stays), under MultiWorkerMirroredStrategy each worker branches
    on its own flag (the collectives can mismatch), and its skipped step leaves `iterations`
    behind the batches consumed (`tests/test_loss_scaling.py` shows all three).

    TensorFlow backend only (the training pipeline is tf.data + tf.distribute); on other
    backends it is plain Adam (no accumulation, no loss scaling) and `NonFiniteGuard` still
    stops the run.
    """

    def __init__(
        self,
        *args,
        accumulate_steps: int = 1,
        initial_loss_scale: float | None = None,
        loss_scale_growth_steps: int = LOSS_SCALE_GROWTH_STEPS,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        check_int("accumulate_steps", accumulate_steps)
        check_int("loss_scale_growth_steps", loss_scale_growth_steps)
        if self.gradient_accumulation_steps:
            raise ValueError(
                "GuardedAccumulatingAdam accumulates with accumulate_steps, not Keras' "
                "gradient_accumulation_steps. Received: "
                f"gradient_accumulation_steps={self.gradient_accumulation_steps!r}"
            )
        if initial_loss_scale is not None:
            check_number("initial_loss_scale", initial_loss_scale, minimum=MIN_LOSS_SCALE)
            if self.loss_scale_factor is not None or keras.backend.backend() != "tensorflow":
                raise ValueError(
                    "initial_loss_scale needs the TensorFlow backend and no loss_scale_factor. "
                    f"Received: loss_scale_factor={self.loss_scale_factor!r}, "
                    f"backend={keras.backend.backend()!r}"
                )
        self.accumulate_steps = accumulate_steps
        self.initial_loss_scale = initial_loss_scale
        self.loss_scale_growth_steps = loss_scale_growth_steps

    @property
    def loss_scaling(self) -> bool:
        """Whether it scales the loss (`initial_loss_scale` set)."""
        return self.initial_loss_scale is not None

    def get_config(self):
        return {
            **super().get_config(),
            "accumulate_steps": self.accumulate_steps,
            "initial_loss_scale": self.initial_loss_scale,
            "loss_scale_growth_steps": self.loss_scale_growth_steps,
        }

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        # Kept out of `self.variables` (set past Keras' attribute tracking), so the weights
        # file has plain Adam's layout and checkpoints load with or without the guard and the
        # loss scale; `checkpoints.save_checkpoint` stores them in its training_state.
        self._add_state("nonfinite_steps", 0, "int64")
        if self.loss_scaling:
            self._add_state("loss_scale", self.initial_loss_scale, "float32")
            self._add_state("loss_scale_skips", 0, "int64")
            self._add_state("loss_scale_finite_steps", 0, "int64")
        if self.accumulate_steps > 1:
            self.accumulated = [
                self.add_variable_from_reference(v, name="accumulated_gradient") for v in var_list
            ]
            self.accumulated_micro_batches = self.add_variable(
                (), initializer="zeros", dtype="int64", aggregation="only_first_replica",
                name="accumulated_micro_batches",
            )  # fmt: skip

    def _add_state(self, name: str, value, dtype: str) -> None:
        variable = keras.Variable(
            value, dtype=dtype, trainable=False, aggregation="only_first_replica", name=name
        )
        object.__setattr__(self, name, variable)

    def checkpoint_state(self) -> dict:
        """The variables a checkpoint keeps in its training_state, by name (none before
        `build`): `nonfinite_steps`, and with loss scaling `loss_scale`, `loss_scale_skips`
        and `loss_scale_finite_steps`."""
        if not self.built:
            return {}
        names = ["nonfinite_steps"]
        if self.loss_scaling:
            names += ["loss_scale", "loss_scale_skips", "loss_scale_finite_steps"]
        return {name: getattr(self, name) for name in names}

    def scale_loss(self, loss):
        """The loss times the loss scale (with loss scaling), for the gradients of a step."""
        if not self.loss_scaling:
            return super().scale_loss(loss)
        scale = self.loss_scale if self.built else self.initial_loss_scale
        return loss * ops.cast(scale, loss.dtype)

    def _unscale(self, grads):
        """Replica context: the gradients divided by the loss scale (with loss scaling)."""
        if not self.loss_scaling:
            return grads
        scale = ops.convert_to_tensor(self.loss_scale)
        return [None if g is None else g / ops.cast(scale, g.dtype) for g in grads]

    def _record(self, ok):
        """Where the agreed flag `ok` is decided (once per call, in the cross-replica context
        under MirroredStrategy): count a non-finite call and move the loss scale. Without a
        `cond`, so it also runs in a replica context."""
        bad = ops.logical_not(ok)
        if self.loss_scaling:
            scale = ops.convert_to_tensor(self.loss_scale)
            overflow = ops.logical_and(bad, ops.greater(scale, MIN_LOSS_SCALE))
            bad = ops.logical_and(bad, ops.logical_not(overflow))
            finite_steps = ops.convert_to_tensor(self.loss_scale_finite_steps) + 1
            grow = ops.logical_and(ok, finite_steps >= self.loss_scale_growth_steps)
            lowered = ops.maximum(scale * 0.5, MIN_LOSS_SCALE)
            self.loss_scale.assign(
                ops.where(overflow, lowered, ops.where(grow, scale * 2.0, scale))
            )
            kept = ops.logical_and(ok, ops.logical_not(grow))
            self.loss_scale_finite_steps.assign(ops.where(kept, finite_steps, 0 * finite_steps))
            self.loss_scale_skips.assign_add(ops.cast(overflow, "int64"))
        self.nonfinite_steps.assign_add(ops.cast(bad, "int64"))

    def _skip(self):
        self.iterations.assign_add(1)

    def _accumulators(self, trainable_variables):
        return [self.accumulated[self._get_variable_index(v)] for v in trainable_variables]

    def _update_with_accumulated(self, grads, trainable_variables):
        """Replica context: Adam on (this replica's accumulated + current) / K."""
        accumulated = self._accumulators(trainable_variables)
        steps = self.accumulate_steps
        mean = [(g + ops.cast(a.value, g.dtype)) / steps for g, a in zip(grads, accumulated)]
        keras.optimizers.Adam.apply(self, mean, trainable_variables)

    def _reset_accumulators(self, trainable_variables):
        for accumulator in self._accumulators(trainable_variables):
            accumulator.assign(ops.zeros_like(accumulator))
        self.accumulated_micro_batches.assign(0)

    def _apply_accumulating(self, ok, grads, trainable_variables):
        """Gradient accumulation; a non-finite micro-batch contributes zeros."""
        import tensorflow as tf

        pairs = [(g, v) for g, v in zip(grads, trainable_variables) if g is not None]
        grads = [ops.where(ok, g, ops.zeros_like(g)) for g, _ in pairs]
        trainable_variables = [v for _, v in pairs]
        update = ops.equal(self.accumulated_micro_batches + 1, self.accumulate_steps)
        if tf.__internal__.distribute.strategy_supports_no_merge_call():
            self._record(ok)

            def finish():
                self._update_with_accumulated(grads, trainable_variables)
                self._reset_accumulators(trainable_variables)

            def accumulate():
                for accumulator, g in zip(self._accumulators(trainable_variables), grads):
                    accumulator.assign_add(ops.cast(g, accumulator.dtype))
                self.accumulated_micro_batches.assign_add(1)

            ops.cond(update, finish, accumulate)
            return

        def cross_replica(distribution, ok, update, grads, trainable_variables):
            self._record(distribution.experimental_local_results(ok)[0])  # equal everywhere
            update = distribution.experimental_local_results(update)[0]

            def finish():
                distribution.extended.call_for_each_replica(
                    self._update_with_accumulated, args=(grads, trainable_variables)
                )
                self._reset_accumulators(trainable_variables)

            def accumulate():
                # Each replica adds its own gradient to its own copy (no reduction yet).
                for accumulator, g in zip(self._accumulators(trainable_variables), grads):
                    distribution.extended.update(
                        accumulator.value, lambda a, x: a.assign_add(x), args=(g,), group=False
                    )
                self.accumulated_micro_batches.assign_add(1)

            ops.cond(update, finish, accumulate)

        tf.distribute.get_replica_context().merge_call(
            cross_replica, args=(ok, update, grads, trainable_variables)
        )

    def apply(self, grads, trainable_variables=None):
        if keras.backend.backend() != "tensorflow":
            return super().apply(grads, trainable_variables)
        import tensorflow as tf

        if not self.built:
            self.build(trainable_variables)
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        grads = self._unscale(grads)
        finite = [ops.all(ops.isfinite(g)) for g in grads if g is not None]
        ok = ops.logical_not(_any_replica(ops.logical_not(ops.all(ops.stack(finite)))))
        if self.accumulate_steps > 1:
            return self._apply_accumulating(ok, grads, trainable_variables)
        apply = super().apply  # zero-argument super() does not work inside the closures
        if tf.__internal__.distribute.strategy_supports_no_merge_call():
            self._record(ok)
            ops.cond(ok, lambda: apply(grads, trainable_variables), self._skip)
            return

        def cross_replica(distribution, ok, grads, trainable_variables):
            ok = distribution.experimental_local_results(ok)[0]  # equal on all replicas
            self._record(ok)

            def apply_all():
                distribution.extended.call_for_each_replica(
                    apply, args=(grads, trainable_variables)
                )

            ops.cond(ok, apply_all, self._skip)

        tf.distribute.get_replica_context().merge_call(
            cross_replica, args=(ok, grads, trainable_variables)
        )
