"""lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)  (paper, equation 3)."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up for `warmup_steps`, then decay with the inverse square root of the step.

    Args:
        d_model: model width (the d_model^-0.5 factor).
        warmup_steps: paper: 4000.
        scale: an extra constant factor (paper: 1.0).

    The optimizer calls the schedule with its 0-based iteration count; the paper's step number
    is that count + 1, so the first update uses step 1.
    """

    def __init__(self, d_model: int, warmup_steps: int = 4000, scale: float = 1.0):
        if not isinstance(d_model, int) or d_model <= 0:
            raise ValueError(f"d_model must be a positive int. Received: d_model={d_model!r}")
        if not isinstance(warmup_steps, int) or warmup_steps <= 0:
            raise ValueError(
                f"warmup_steps must be a positive int. Received: warmup_steps={warmup_steps!r}"
            )
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, iteration):
        step = ops.cast(iteration, "float32") + 1.0
        decay = ops.rsqrt(step)
        warmup = step * (float(self.warmup_steps) ** -1.5)
        return self.scale * (float(self.d_model) ** -0.5) * ops.minimum(decay, warmup)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}
