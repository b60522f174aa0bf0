"""`TrainingConfig`: a training run as its sections (`config.sections`), built from the flags'
flat names or read by section.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from keras_transformer.config.inference import SearchOptions
from keras_transformer.config.run_defaults import (
    DEFAULT_TRAIN_STEPS,
    MIN_STEP_SECONDS,
    PLANNED_DECAY,
    budget_minutes_for,
    train_minutes_for,
)
from keras_transformer.config.sections import (
    ArchitectureConfig,
    DataConfig,
    DistributionConfig,
    EvaluationConfig,
    RecipeConfig,
    RunConfig,
    WarmStartConfig,
    _section,
)


@dataclass(frozen=True)
class TrainingConfig:
    """A training run in sections: the model, its data, the recipe (paper, section 5), the
    evaluations, the warm start, the devices and the run's plumbing. Each field's meaning is
    written once, as its `help` (`option`), which is also its flag's help.

        cfg = TrainingConfig.from_flat(model="tiny", train_steps=1200)  # the flags' names
        cfg.recipe.train_steps, cfg.run.model_dir                       # read by section

    Defaults train the `quick` model on the bundled En-De corpus in about ten minutes on a
    2-core CPU. They come from a measured comparison at equal steps, dev loss/accuracy and
    test BLEU (benchmarks/results/recipe_study.md, and
    benchmarks/results/2026-11-25-benchmarks-history.md, "Recipe study for the default run":
    `python benchmarks/run.py recipe --variants VARIANTS`): pre-norm with no dropout at the
    paper's learning rate (scale 1, warm-up 400) learns faster per step than post-norm, whose
    best rate (scale 0.5, no dropout) sits next to a divergence, while pre-norm still trains at
    twice its rate; dropout 0.1 slows a run of a few epochs. Label smoothing 0.1,
    1536-token batches (many small updates), vocabulary 4000, max_length 128 and averaging the
    last 5 checkpoints (100 steps apart) stay as they were. The paper's base recipe:
    `model="base", batch_tokens=25000` (global, over 8 GPUs), `warmup_steps=4000,
    train_steps=100_000, average_last=5`.

    The flat names (`to_flat`) are those of `MODEL_DIR/training_config.json`, which a rerun
    compares with its own (`training.preflight`).
    """

    architecture: ArchitectureConfig = _section(ArchitectureConfig, "model")
    data: DataConfig = _section(DataConfig, "data")
    recipe: RecipeConfig = _section(RecipeConfig, "recipe (paper, section 5)")
    evaluation: EvaluationConfig = _section(EvaluationConfig, "evaluation")
    warm_start: WarmStartConfig = _section(WarmStartConfig, "warm start")
    distribution: DistributionConfig = _section(DistributionConfig, "devices")
    run: RunConfig = _section(RunConfig, "run")

    def __post_init__(self) -> None:
        """The checks across sections (each section checks its own fields)."""
        recipe, devices = self.recipe, self.distribution
        if recipe.batch_tokens < self.architecture.max_length:
            raise ValueError(
                "batch_tokens must be >= max_length. Received: "
                f"batch_tokens={recipe.batch_tokens}, max_length={self.architecture.max_length}"
            )
        if self.planned() and devices.strategy == "multi_worker":
            raise ValueError(
                "A run planned to a time budget needs one process: give --train-steps under "
                "multi_worker. Received: strategy='multi_worker', train_steps=None, "
                f"time_budget_minutes={recipe.time_budget_minutes!r}"
            )

    # Flat names ----------------------------------------------------------------------------

    @classmethod
    def flat_fields(cls) -> list[tuple[dataclasses.Field, dataclasses.Field]]:
        """`(section, field)` of every field of every section, in order. A field's name is
        its flat name: unique across sections, the name of `from_flat`, `to_flat`,
        `training_config.json` and (`-` for `_`) the flag."""
        return [
            (section, field)
            for section in dataclasses.fields(cls)
            for field in dataclasses.fields(section.default_factory)
        ]

    @classmethod
    def from_flat(cls, **values: Any) -> TrainingConfig:
        """The config of flat field names (defaults for the others), each routed to its
        section: `TrainingConfig.from_flat(model="tiny", train_steps=1200)`, or a run's
        `training_config.json`. A name no section has is a ValueError naming it."""
        sections = {section.name: {} for section in dataclasses.fields(cls)}
        for section, field in cls.flat_fields():
            if field.name in values:
                sections[section.name][field.name] = values.pop(field.name)
        if values:
            raise ValueError(f"Unknown TrainingConfig fields: {sorted(values)}")
        return cls(
            **{
                section.name: section.default_factory(**sections[section.name])
                for section in dataclasses.fields(cls)
            }
        )

    def to_flat(self) -> dict[str, Any]:
        """`{flat name: value}` of every field (what `training_config.json` holds)."""
        return {
            field.name: getattr(getattr(self, section.name), field.name)
            for section, field in self.flat_fields()
        }

    def replace(self, **changes: Any) -> TrainingConfig:
        """A copy with some fields changed, by flat name (validated again)."""
        return self.from_flat(**{**self.to_flat(), **changes})

    # What the sections decide together -----------------------------------------------------

    def budget_seconds(self) -> float | None:
        """The budget the run plans its steps to (seconds), or None: a run with
        `train_steps`, without a budget, or under multi_worker without an explicit one."""
        recipe = self.recipe
        if recipe.train_steps is not None:
            return None
        if self.distribution.strategy == "multi_worker" and recipe.time_budget_minutes is None:
            return None  # one process measures and plans: the workers could not agree
        minutes = budget_minutes_for(self.architecture.model, recipe.time_budget_minutes)
        return minutes * 60.0 if minutes > 0 else None

    def planned(self) -> bool:
        """Whether the run plans its steps to a time budget."""
        return self.budget_seconds() is not None

    def step_limit(self) -> int:
        """The most updates the run may make: `train_steps`, a planned run's bound before
        its plan (budget / `MIN_STEP_SECONDS`), else `DEFAULT_TRAIN_STEPS`."""
        if self.recipe.train_steps is not None:
            return self.recipe.train_steps
        budget = self.budget_seconds()
        return int(budget / MIN_STEP_SECONDS) if budget else DEFAULT_TRAIN_STEPS

    def resolved_decay(self) -> str:
        """`decay`, or its default: `PLANNED_DECAY` when planned, the paper's "rsqrt"."""
        if self.recipe.decay is not None:
            return self.recipe.decay
        return PLANNED_DECAY if self.planned() else "rsqrt"

    def time_limit_seconds(self) -> float | None:
        """The run's limit on training time in seconds (`train_minutes`, resolved by
        `train_minutes_for`), or None without one."""
        minutes = train_minutes_for(self.architecture.model, self.recipe.train_minutes)
        return minutes * 60.0 if minutes > 0 else None

    def eval_search(self) -> SearchOptions:
        """The beam search of the run's evaluations and export (`eval_beam_size`,
        `eval_alpha`; None: `eval_alpha_for(model)`)."""
        return self.evaluation.search(self.architecture.model)
