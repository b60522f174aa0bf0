"""The defaults of a training run that depend on its preset: the evaluation's length penalty,
the time budget and training limit of the default command (the quick preset), and the decay
of a run planned to a budget.
"""

from __future__ import annotations

from keras_transformer.config.inference import SearchOptions

# The quick preset's length penalty: its ten-minute models end hypotheses early at the
# paper's 0.6 (BLEU's brevity penalty), a stronger length reward corrects that, and this alpha
# gave the best dev BLEU for the default run and two other quick runs, hypotheses running long
# above it (benchmarks/results/2026-11-25-benchmarks-history.md, "The quick preset's
# length penalty, and two recipe changes at the full budget": `python pipelines/evaluate.py
# --model-dir RUN --split dev --alpha A`).
QUICK_EVAL_ALPHA = 1.2


def eval_alpha_for(model: str, eval_alpha: float | None = None) -> float:
    """The length penalty alpha a run of preset `model` evaluates and exports with:
    `eval_alpha` if given, else `QUICK_EVAL_ALPHA` for "quick" and the paper's 0.6 for every
    other preset."""
    if eval_alpha is not None:
        return eval_alpha
    return QUICK_EVAL_ALPHA if model == "quick" else SearchOptions.alpha


# The quick preset's wall-clock limit on training (`model.fit`, evaluations included): the
# default command must train in at most ten minutes on a 2-core CPU whatever its speed; the
# work after the stop (last dev evaluation, validation pass, checkpoint) stays inside ten,
# and a slower CPU stops earlier, with fewer steps
# (benchmarks/results/2026-11-25-benchmarks-history.md, "A ten-minute limit on training":
# `python pipelines/train_wmt.py` with timestamps on every line).
QUICK_TRAIN_MINUTES = 9.5


# The quick preset's time budget for the whole run, from the process's start to the exported
# model (tokenizer, training, evaluations, test BLEU, export): a run without `train_steps`
# plans its steps to it (`training.budget`), so the README's first command takes at most ten
# minutes plus the install on any CPU.
QUICK_BUDGET_MINUTES = 10.0
DEFAULT_TRAIN_STEPS = 2000  # a run with neither train_steps nor a budget
# The decay of a run planned to a budget (`training.schedule`): the best dev BLEU of the four
# shapes in the budget study, one seed (benchmarks/results/budget_study.md, rows rsqrt,
# rsqrt_cooldown, linear and cosine: `python benchmarks/run.py recipe budget --steps 2600
# --runs-dir RUNS --output-dir OUT`).
PLANNED_DECAY = "rsqrt_cooldown"
MIN_STEP_SECONDS = 0.01  # a planned run's bound on steps before its plan: budget / this


def budget_minutes_for(model: str, budget_minutes: float | None = None) -> float:
    """The time budget (minutes, 0: none) of a run of preset `model` without `train_steps`:
    `budget_minutes` if given, else `QUICK_BUDGET_MINUTES` for "quick" and none otherwise."""
    if budget_minutes is not None:
        return budget_minutes
    return QUICK_BUDGET_MINUTES if model == "quick" else 0.0


def train_minutes_for(model: str, train_minutes: float | None = None) -> float:
    """Wall-clock minutes a run of preset `model` may train (0: no limit): `train_minutes`
    if given, else `QUICK_TRAIN_MINUTES` for "quick" and no limit for every other preset."""
    if train_minutes is not None:
        return train_minutes
    return QUICK_TRAIN_MINUTES if model == "quick" else 0.0
