"""Keras' Adam with TensorFlow's fused update kernel (`ResourceApplyAdam`).

Keras 3's `Adam.update_step` is written in `keras.ops`: per variable about ten element-wise
ops (subtract, multiply, square, sqrt, divide, three assignments), each one a pass over the
variable's memory. TensorFlow's `ResourceApplyAdam` kernel does the same arithmetic in one
pass. With Transformer-base's 63M parameters on a CPU that is a measurable share of a step
(`benchmarks/profile_train_step.py`).

The update is Keras' (and the paper's) exactly:

    alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
    m <- m + (g - m) (1 - beta_1);   v <- v + (g^2 - v) (1 - beta_2)
    w <- w - alpha m / (sqrt(v) + epsilon)

with t = iterations + 1, so weights, slots and checkpoints are those of `keras.optimizers.Adam`
(a checkpoint loads into either). Other backends, `amsgrad` and variables that are not float32
or float64 take Keras' own update.
"""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class FusedAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` whose TensorFlow update is one fused kernel per variable.

    Same arguments and variables as `keras.optimizers.Adam`.

    Example:
    >>> optimizer = FusedAdam(learning_rate=1e-3, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    """

    def update_step(self, gradient, variable, learning_rate):
        if not self._fusable(variable):
            return super().update_step(gradient, variable, learning_rate)
        import tensorflow as tf

        if isinstance(variable, keras.Variable):
            variable = variable.value  # the tf.Variable (a component under tf.distribute)
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        m, v = self._momentums[index].value, self._velocities[index].value
        step = tf.cast(self.iterations + 1, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=m.handle,
            v=v.handle,
            beta1_power=tf.pow(tf.cast(self.beta_1, dtype), step),
            beta2_power=tf.pow(tf.cast(self.beta_2, dtype), step),
            lr=tf.cast(learning_rate, dtype),
            beta1=tf.cast(self.beta_1, dtype),
            beta2=tf.cast(self.beta_2, dtype),
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(tf.convert_to_tensor(gradient), dtype),  # IndexedSlices -> dense
        )

    def _fusable(self, variable) -> bool:
        return (
            keras.backend.backend() == "tensorflow"
            and not self.amsgrad
            and keras.backend.standardize_dtype(variable.dtype) in ("float32", "float64")
        )
