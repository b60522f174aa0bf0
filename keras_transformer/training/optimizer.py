"""The training run's optimizer: the paper's Adam (Keras' `keras.optimizers.Adam`) guarded
against non-finite gradients and accumulating gradients over micro-batches.

    optimizer = GuardedAccumulatingAdam(schedule, 0.9, 0.98, 1e-9, accumulate_steps=4)

- Guarded: every step's gradients are checked (on all replicas) before they are applied; a
  step with a NaN or Inf gradient leaves weights and moments as they were and is counted in
  `optimizer.nonfinite_steps` (a variable that checkpoints save). The step still counts in
  `iterations`, so the learning-rate schedule and the data position move on.
  `nonfinite.NonFiniteGuard` turns the count into a stop or a logged skip.
- Accumulating: with `accumulate_steps=K`, K micro-batches make one update with the mean of
  their gradients; `iterations` and the schedule count updates. A non-finite micro-batch adds
  zeros (the update averages the others' gradients over K).

Without accumulation its variables are those of `keras.optimizers.Adam` (the skip counter is
kept out of them, in the checkpoint's training_state), so a checkpoint loads into either.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.checks import check_int


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
    """`keras.optimizers.Adam` that skips a step whose gradients are not all finite and
    accumulates gradients over `accumulate_steps` micro-batches.

    Args:
        accumulate_steps: K, micro-batches per update (1: none).
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

    TensorFlow backend only (the training pipeline is tf.data + tf.distribute); on other
    backends it is plain Adam (no accumulation) and `NonFiniteGuard` still stops the run.
    """

    def __init__(self, *args, accumulate_steps: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        check_int("accumulate_steps", accumulate_steps)
        if self.gradient_accumulation_steps:
            raise ValueError(
                "GuardedAccumulatingAdam accumulates with accumulate_steps, not Keras' "
                "gradient_accumulation_steps. Received: "
                f"gradient_accumulation_steps={self.gradient_accumulation_steps!r}"
            )
        self.accumulate_steps = accumulate_steps

    def get_config(self):
        return {**super().get_config(), "accumulate_steps": self.accumulate_steps}

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        # Kept out of `self.variables` (set past Keras' attribute tracking), so the weights
        # file has plain Adam's layout and checkpoints load with or without the guard;
        # `checkpoints.save_checkpoint` stores the count in its training_state.
        counter = keras.Variable(
            0, dtype="int64", trainable=False, aggregation="only_first_replica",
            name="nonfinite_steps",
        )  # fmt: skip
        object.__setattr__(self, "nonfinite_steps", counter)
        if self.accumulate_steps > 1:
            self.accumulated = [
                self.add_variable_from_reference(v, name="accumulated_gradient") for v in var_list
            ]
            self.accumulated_micro_batches = self.add_variable(
                (), initializer="zeros", dtype="int64", aggregation="only_first_replica",
                name="accumulated_micro_batches",
            )  # fmt: skip

    def _skip(self):
        self.nonfinite_steps.assign_add(1)
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

        self.nonfinite_steps.assign_add(ops.cast(ops.logical_not(ok), "int64"))
        pairs = [(g, v) for g, v in zip(grads, trainable_variables) if g is not None]
        grads = [ops.where(ok, g, ops.zeros_like(g)) for g, _ in pairs]
        trainable_variables = [v for _, v in pairs]
        update = ops.equal(self.accumulated_micro_batches + 1, self.accumulate_steps)
        if tf.__internal__.distribute.strategy_supports_no_merge_call():

            def finish():
                self._update_with_accumulated(grads, trainable_variables)
                self._reset_accumulators(trainable_variables)

            def accumulate():
                for accumulator, g in zip(self._accumulators(trainable_variables), grads):
                    accumulator.assign_add(ops.cast(g, accumulator.dtype))
                self.accumulated_micro_batches.assign_add(1)

            ops.cond(update, finish, accumulate)
            return

        def cross_replica(distribution, update, grads, trainable_variables):
            update = distribution.experimental_local_results(update)[0]  # equal everywhere

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
            cross_replica, args=(update, grads, trainable_variables)
        )

    def apply(self, grads, trainable_variables=None):
        if keras.backend.backend() != "tensorflow":
            return super().apply(grads, trainable_variables)
        import tensorflow as tf

        if not self.built:
            self.build(trainable_variables)
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        finite = [ops.all(ops.isfinite(g)) for g in grads if g is not None]
        ok = ops.logical_not(_any_replica(ops.logical_not(ops.all(ops.stack(finite)))))
        if self.accumulate_steps > 1:
            return self._apply_accumulating(ok, grads, trainable_variables)
        apply = super().apply  # zero-argument super() does not work inside the closures
        if tf.__internal__.distribute.strategy_supports_no_merge_call():
            ops.cond(ok, lambda: apply(grads, trainable_variables), self._skip)
            return

        def cross_replica(distribution, ok, grads, trainable_variables):
            ok = distribution.experimental_local_results(ok)[0]  # equal on all replicas

            def apply_all():
                distribution.extended.call_for_each_replica(
                    apply, args=(grads, trainable_variables)
                )

            ops.cond(ok, apply_all, self._skip)

        tf.distribute.get_replica_context().merge_call(
            cross_replica, args=(ok, grads, trainable_variables)
        )
