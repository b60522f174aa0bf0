"""lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)  (paper, equation 3), and
the decay shapes a run planned to a time budget may end with (not in the paper).

Every shape warms up linearly to the paper's peak `scale * d_model^-0.5 * warmup_steps^-0.5`
at step `warmup_steps`, then decays:

    rsqrt           the paper: peak * sqrt(warmup_steps / step), no planned end
    rsqrt_cooldown  rsqrt, times a linear ramp to zero over the last `cooldown_fraction` of
                    the decay (WSD-like: the rate ends where the plan ends)
    linear          peak * (1 - p), linear to zero at the planned end
    cosine          peak * (1 + cos(pi * p)) / 2

where p in [0, 1] is the progress through the decay, from the end of warm-up to the planned
last step (a run planned to end inside its warm-up only warms up: p stays 0). The plan can
change while the run goes on (`set_total_steps`: a slower machine than measured at first): p
then goes on from where it stands to 1 at the new last step, so the rate never jumps. The plan
lives in three scalar variables (anchor step, progress at the anchor, last step) that the
training callbacks set from `MODEL_DIR/plan.json`.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int, check_number
from keras_transformer.constants import DECAYS

PLANNED_DECAYS = ("rsqrt_cooldown", "linear", "cosine")  # shapes that need the last step


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up for `warmup_steps`, then a decay (the paper's inverse square root).

    Args:
        d_model: model width (the d_model^-0.5 factor).
        warmup_steps: paper: 4000.
        scale: an extra constant factor (paper: 1.0).
        cooldown_steps: rsqrt only: if > 0, the rate is also multiplied by
            min(1, (total_steps - step + 1) / cooldown_steps), a linear decay over the last
            `cooldown_steps` updates whose final update (step = total_steps) gets
            1/cooldown_steps of the formula's rate (paper: 0, no cool-down).
        total_steps: the run's last step; required when cooldown_steps > 0 or for a decay in
            `PLANNED_DECAYS`.
        decay: "rsqrt" (paper), "rsqrt_cooldown", "linear" or "cosine" (module docstring).
        cooldown_fraction: the share of the decay that "rsqrt_cooldown" ramps down in.

    The optimizer calls the schedule with its 0-based iteration count; the paper's step number
    is that count + 1, so the first update uses step 1. With a planned decay the final update
    (step = total_steps) still gets a small positive rate: p reaches 1 one step later.
    """

    def __init__(
        self,
        d_model: int,
        warmup_steps: int = 4000,
        scale: float = 1.0,
        cooldown_steps: int = 0,
        total_steps: int | None = None,
        decay: str = "rsqrt",
        cooldown_fraction: float = 0.2,
    ):
        check_int("d_model", d_model)
        check_int("warmup_steps", warmup_steps)
        check_int("cooldown_steps", cooldown_steps, minimum=0)
        check_choice("decay", decay, DECAYS)
        if cooldown_steps and (not isinstance(total_steps, int) or total_steps < cooldown_steps):
            raise ValueError(
                "cooldown_steps needs total_steps >= cooldown_steps. Received: "
                f"cooldown_steps={cooldown_steps}, total_steps={total_steps!r}"
            )
        if decay in PLANNED_DECAYS:
            check_int("total_steps", total_steps)
        check_number("cooldown_fraction", cooldown_fraction, above=0.0, maximum=1.0)
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale
        self.cooldown_steps = cooldown_steps
        self.total_steps = total_steps
        self.decay = decay
        self.cooldown_fraction = cooldown_fraction
        self._plan = None  # (anchor step, progress there, last step): variables, when planned
        if decay in PLANNED_DECAYS:
            self._plan = tuple(
                keras.Variable(value, dtype="float32", trainable=False, name=name)
                for name, value in (
                    ("plan_anchor_step", float(warmup_steps)),
                    ("plan_anchor_progress", 0.0),
                    ("plan_total_steps", float(total_steps)),
                )
            )

    # The plan ------------------------------------------------------------------------------

    def progress_at(self, step: float) -> float:
        """p at `step` (1-based) under the current plan, in Python (0 for the paper's rsqrt)."""
        if self._plan is None:
            return 0.0
        anchor, at_anchor, total = (float(ops.convert_to_numpy(v)) for v in self._plan)
        return _progress(step, anchor, at_anchor, total, clip=lambda x: min(max(x, 0.0), 1.0))

    def set_total_steps(self, total_steps: int, from_step: int | None = None) -> None:
        """Plan the decay to end at `total_steps`, going on from the progress reached at
        `from_step` (default: the end of warm-up, i.e. a plan made before the decay began)."""
        check_int("total_steps", total_steps)
        self.total_steps = total_steps
        if self._plan is None:
            return
        anchor = float(max(from_step or 0, self.warmup_steps))
        at_anchor = self.progress_at(anchor)
        for variable, value in zip(self._plan, (anchor, at_anchor, float(total_steps))):
            variable.assign(value)

    def plan_anchor(self) -> tuple[float, float]:
        """`(anchor step, progress there)` of the current plan (`(warmup_steps, 0)` for the
        paper's rsqrt, which has none)."""
        if self._plan is None:
            return float(self.warmup_steps), 0.0
        return tuple(float(ops.convert_to_numpy(v)) for v in self._plan[:2])

    def restore_plan(self, anchor_step: float, anchor_progress: float, total_steps: int) -> None:
        """Set the plan's variables as recorded (`training.budget.Plan.anchor_for`)."""
        self.total_steps = int(total_steps)
        if self._plan is not None:
            for variable, value in zip(self._plan, (anchor_step, anchor_progress, total_steps)):
                variable.assign(float(value))

    # The rate ------------------------------------------------------------------------------

    def __call__(self, iteration):
        step = ops.cast(iteration, "float32") + 1.0
        warmup = float(self.warmup_steps)
        peak = self.scale * (float(self.d_model) ** -0.5) * warmup**-0.5
        rise = ops.minimum(step / warmup, 1.0)
        rsqrt = ops.minimum(ops.sqrt(warmup / step), 1.0)
        if self.decay == "rsqrt":
            rate = peak * rise * rsqrt  # = the paper's min(step^-0.5, step * warmup^-1.5)
            if self.cooldown_steps:
                left = (float(self.total_steps) - step + 1.0) / float(self.cooldown_steps)
                rate = rate * ops.clip(left, 0.0, 1.0)
            return rate
        p = _progress(step, *self._plan, clip=lambda x: ops.clip(x, 0.0, 1.0), maximum=ops.maximum)
        if self.decay == "linear":
            shape = 1.0 - p
        elif self.decay == "cosine":
            shape = 0.5 * (1.0 + ops.cos(math.pi * p))
        else:  # rsqrt_cooldown
            shape = rsqrt * ops.minimum((1.0 - p) / self.cooldown_fraction, 1.0)
        return peak * rise * shape

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
            "cooldown_steps": self.cooldown_steps,
            "total_steps": self.total_steps,
            "decay": self.decay,
            "cooldown_fraction": self.cooldown_fraction,
        }


def _progress(step, anchor, at_anchor, total, clip, maximum=max):
    """p(step) = p_anchor + (1 - p_anchor) (step - anchor) / max(total - anchor + 1, 1),
    clipped. A plan that ends before its anchor (a run shorter than its warm-up) has no decay:
    p stays 0 up to the anchor, so the run only warms up (without the `max`, p was 1 from the
    first step and the rate 0 throughout)."""
    span = maximum(total - anchor + 1.0, 1.0)
    return clip(at_anchor + (1.0 - at_anchor) * (step - anchor) / span)
