"""The `quick` preset, default of `TrainingConfig` and `pipelines/train_wmt.py` (the recipe of
benchmarks/results/recipe_study.md)."""

from __future__ import annotations

import pytest

from keras_transformer import TransformerConfig
from keras_transformer.config import TrainingConfig


def test_quick_preset_fields():
    config = TransformerConfig.quick(4000)
    assert config == TransformerConfig.preset("quick", 4000)
    assert (config.num_layers, config.d_model, config.d_ff, config.num_heads) == (3, 128, 512, 4)
    assert (config.d_k, config.d_v) == (32, 32)
    assert config.norm_position == "pre" and config.dropout == 0.0
    assert config.share_embeddings and config.positional_encoding == "sinusoidal"
    assert TransformerConfig.quick(4000, num_layers=2).num_layers == 2
    assert TransformerConfig.quick(4000, norm_position="post").norm_position == "post"


def test_quick_preset_parameter_count():
    from keras_transformer import build_transformer

    config = TransformerConfig.quick(4000)
    # Same weights as tiny (LayerNorm placement moves no weight) plus the final encoder and
    # decoder LayerNorms of a pre-norm stack: 2 x (gamma + beta) x 128.
    tiny = build_transformer(TransformerConfig.tiny(4000)).count_params()
    assert build_transformer(config).count_params() == tiny + 2 * 2 * 128
    assert tiny == 1_900_544


def test_training_config_defaults_build_quick():
    cfg = TrainingConfig()
    assert cfg.model == "quick"
    config = cfg.model_config()
    assert config == TransformerConfig.quick(
        cfg.vocab_size, max_length=cfg.max_length, label_smoothing=cfg.label_smoothing
    )
    assert config.norm_position == "pre" and config.dropout == 0.0
    # The preset's dropout and norm position stay overridable, and tiny keeps its own.
    assert TrainingConfig(dropout=0.1).model_config().dropout == 0.1
    assert TrainingConfig(model="tiny").model_config().norm_position == "post"
    assert TrainingConfig(model="tiny").model_config().dropout == 0.1


def test_train_command_defaults_to_quick():
    from keras_transformer.cli import train

    parser = train.build_parser()
    assert train.training_config(parser.parse_args([])) == TrainingConfig()
    assert train.training_config(parser.parse_args(["--config", "tiny"])).model == "tiny"
    with pytest.raises(SystemExit):
        parser.parse_args(["--config", "huge"])
