"""Configuration as frozen dataclasses with presets: the model (`TransformerConfig`,
`config.model`), inference options (`SearchOptions`, `DocumentOptions`, `AlignmentOptions`,
`config.inference`) and a training run (`TrainingConfig`, `config.training`, in the sections
of `config.sections`, with the per-preset defaults of `config.run_defaults`).

    from keras_transformer.config import SearchOptions, TrainingConfig, TransformerConfig
"""

from keras_transformer.config.inference import (
    ALIGNMENT_ROWS,
    OVERLONG,
    STOP_LOOKAHEADS,
    AlignmentOptions,
    DocumentOptions,
    SearchOptions,
)
from keras_transformer.config.model import (
    PRESETS,
    TransformerConfig,
)
from keras_transformer.config.run_defaults import (
    DEFAULT_TRAIN_STEPS,
    MIN_STEP_SECONDS,
    PLANNED_DECAY,
    QUICK_BUDGET_MINUTES,
    QUICK_EVAL_ALPHA,
    QUICK_TRAIN_MINUTES,
    budget_minutes_for,
    eval_alpha_for,
    train_minutes_for,
)
from keras_transformer.config.sections import (
    DELIVERIES,
    EVAL_DECODES,
    FREEZE_CHOICES,
    MIXED_PRECISION,
    PRESET_OVERRIDES,
    RECIPES,
    STRATEGIES,
    ArchitectureConfig,
    DataConfig,
    DistributionConfig,
    EvaluationConfig,
    RecipeConfig,
    RunConfig,
    WarmStartConfig,
    option,
)
from keras_transformer.config.training import (
    TrainingConfig,
)

__all__ = [
    "ALIGNMENT_ROWS",
    "AlignmentOptions",
    "ArchitectureConfig",
    "DEFAULT_TRAIN_STEPS",
    "DELIVERIES",
    "DataConfig",
    "DistributionConfig",
    "DocumentOptions",
    "EVAL_DECODES",
    "EvaluationConfig",
    "FREEZE_CHOICES",
    "MIN_STEP_SECONDS",
    "MIXED_PRECISION",
    "OVERLONG",
    "PLANNED_DECAY",
    "PRESETS",
    "PRESET_OVERRIDES",
    "QUICK_BUDGET_MINUTES",
    "QUICK_EVAL_ALPHA",
    "QUICK_TRAIN_MINUTES",
    "RECIPES",
    "RecipeConfig",
    "RunConfig",
    "STOP_LOOKAHEADS",
    "STRATEGIES",
    "SearchOptions",
    "TrainingConfig",
    "TransformerConfig",
    "WarmStartConfig",
    "budget_minutes_for",
    "eval_alpha_for",
    "option",
    "train_minutes_for",
]
