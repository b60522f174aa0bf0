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


def test_quick_runs_evaluate_with_their_own_length_penalty():
    from keras_transformer.config import QUICK_EVAL_ALPHA, SearchOptions

    paper = SearchOptions().alpha
    assert paper == 0.6 and QUICK_EVAL_ALPHA == 1.2
    assert TrainingConfig().eval_alpha is None
    assert TrainingConfig().eval_search() == SearchOptions(alpha=QUICK_EVAL_ALPHA)
    for model in ("tiny", "base", "big"):  # the paper's presets keep the paper's inference
        assert TrainingConfig(model=model).eval_search() == SearchOptions()
    given = TrainingConfig(eval_alpha=0.3, eval_beam_size=2).eval_search()
    assert (given.alpha, given.beam_size) == (0.3, 2)
    assert TrainingConfig(model="base", eval_alpha=1.0).eval_search().alpha == 1.0
    with pytest.raises(ValueError, match="eval_alpha='high'"):
        TrainingConfig(eval_alpha="high")


@pytest.mark.parametrize(
    "run, expected",
    [
        (None, 0.6),  # a model directory without training_config.json (trained elsewhere)
        ({"model": "quick", "eval_alpha": None}, 1.2),
        ({"model": "base", "eval_alpha": None}, 0.6),
        ({"model": "quick", "eval_alpha": 0.6}, 0.6),  # quick runs from before the change
        ({"model": "tiny", "eval_alpha": 0.9}, 0.9),
    ],
)
def test_commands_default_to_the_alpha_of_the_run_they_load(tmp_path, run, expected):
    import json

    from keras_transformer import artifacts
    from keras_transformer.cli import common, evaluate

    if run is not None:
        (tmp_path / artifacts.RUN_CONFIG_FILE).write_text(json.dumps(run))
    assert artifacts.run_eval_alpha(str(tmp_path)) == expected
    parser = evaluate.build_parser()
    args = parser.parse_args(["--model-dir", str(tmp_path)])
    assert common.search_options(args).alpha == expected
    given = parser.parse_args(["--model-dir", str(tmp_path), "--alpha", "0.25"])
    assert common.search_options(given).alpha == 0.25


def test_train_command_exports_with_the_evaluated_search(monkeypatch):
    """The train command's export translates with the beam and alpha its test BLEU used."""
    from keras_transformer.cli import train
    from keras_transformer.serving import export

    seen = {}
    monkeypatch.setattr(export, "export_savedmodel", lambda *a, **k: seen.update(k) or "EXPORTED")
    cfg = train.training_config(train.build_parser().parse_args(["--eval-beam-size", "3"]))
    monkeypatch.setattr(train, "training_config", lambda args: cfg)
    monkeypatch.setattr(train, "final_weights", lambda cfg: "W")
    monkeypatch.setattr(train, "_finish_summary", lambda cfg, summary, weights: {})
    monkeypatch.setattr(
        "keras_transformer.training.trainer.train",
        lambda cfg, callbacks: {
            "chief": True,
            "steps": 1,
            "train_seconds": 1.0,
            "tokens_per_sec": 1.0,
            "step_seconds": 1.0,
        },  # fmt: skip
    )
    monkeypatch.setattr(train, "dev_bleu_callbacks", lambda cfg: [])
    args = train.build_parser().parse_args(["--export-dir", "/tmp/unused"])
    assert train.train(args) == 0
    assert seen["search"] == cfg.eval_search()
    assert (seen["search"].alpha, seen["search"].beam_size) == (1.2, 3)
