"""lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)  (paper, equation 3),
optionally with a linear cool-down to zero over a run's last steps (not in the paper)."""

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
        cooldown_steps: if > 0, the rate is also multiplied by
            min(1, (total_steps - step + 1) / cooldown_steps), a linear decay over the last
            `cooldown_steps` updates whose final update (step = total_steps) gets 1/cooldown_steps
            of the formula's rate (paper: 0, no cool-down).
        total_steps: the run's last step; required when cooldown_steps > 0.

    The optimizer calls the schedule with its 0-based iteration count; the paper's step number
    is that count + 1, so the first update uses step 1.
    """

    def __init__(
        self,
        d_model: int,
        warmup_steps: int = 4000,
        scale: float = 1.0,
        cooldown_steps: int = 0,
        total_steps: int | None = None,
    ):
        if not isinstance(d_model, int) or d_model <= 0:
            raise ValueError(f"d_model must be a positive int. Received: d_model={d_model!r}")
        if not isinstance(warmup_steps, int) or warmup_steps <= 0:
            raise ValueError(
                f"warmup_steps must be a positive int. Received: warmup_steps={warmup_steps!r}"
            )
        if not isinstance(cooldown_steps, int) or cooldown_steps < 0:
            raise ValueError(
                f"cooldown_steps must be an int >= 0. Received: cooldown_steps={cooldown_steps!r}"
            )
        if cooldown_steps and (not isinstance(total_steps, int) or total_steps < cooldown_steps):
            raise ValueError(
                "cooldown_steps needs total_steps >= cooldown_steps. Received: "
                f"cooldown_steps={cooldown_steps}, total_steps={total_steps!r}"
            )
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale
        self.cooldown_steps = cooldown_steps
        self.total_steps = total_steps

    def __call__(self, iteration):
        step = ops.cast(iteration, "float32") + 1.0
        decay = ops.rsqrt(step)
        warmup = step * (float(self.warmup_steps) ** -1.5)
        rate = self.scale * (float(self.d_model) ** -0.5) * ops.minimum(decay, warmup)
        if self.cooldown_steps:
            left = (float(self.total_steps) - step + 1.0) / float(self.cooldown_steps)
            rate = rate * ops.clip(left, 0.0, 1.0)
        return rate

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
            "cooldown_steps": self.cooldown_steps,
            "total_steps": self.total_steps,
        }
