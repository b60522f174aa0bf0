"""The `quick` preset, default of `TrainingConfig` and `pipelines/train_wmt.py` (the recipe of
benchmarks/results/recipe_study.md)."""

from __future__ import annotations

import pytest

from keras_transformer import TransformerConfig
from keras_transformer.config import TrainingConfig


def test_quick_preset_fields():
    config = TransformerConfig.quick(4000)
    assert config == TransformerConfig.preset("quick", 4000)
    assert (config.num_layers, config.d_model, config.d_ff, config.num_heads) == (2, 128, 512, 4)
    assert (config.d_k, config.d_v) == (32, 32)
    assert config.norm_position == "pre" and config.dropout == 0.0
    assert config.share_embeddings and config.positional_encoding == "sinusoidal"
    assert TransformerConfig.quick(4000, num_layers=3).num_layers == 3
    assert TransformerConfig.quick(4000, norm_position="post").norm_position == "post"


def test_quick_preset_parameter_count():
    from keras_transformer import build_transformer

    config = TransformerConfig.quick(4000)
    # Same weights as a 2-layer tiny (LayerNorm placement moves no weight) plus the final
    # encoder and decoder LayerNorms of a pre-norm stack: 2 x (gamma + beta) x 128.
    tiny = build_transformer(TransformerConfig.tiny(4000, num_layers=2)).count_params()
    assert build_transformer(config).count_params() == tiny + 2 * 2 * 128
    # A layer pair: encoder (4 x (128 x 128 + 128) attention, 128 x 512 + 512 + 512 x 128 +
    # 128 FFN, 2 LayerNorms) and decoder (two attentions, FFN, 3 LayerNorms).
    attention = 4 * (128 * 128 + 128)
    ffn = 128 * 512 + 512 + 512 * 128 + 128
    encoder_layer, decoder_layer = attention + ffn + 2 * 256, 2 * attention + ffn + 3 * 256
    assert tiny == 4000 * 128 + 2 * (encoder_layer + decoder_layer)


def test_training_config_defaults_build_quick():
    architecture = TrainingConfig().architecture
    assert architecture.model == "quick"
    config = architecture.model_config()
    assert config == TransformerConfig.quick(
        architecture.vocab_size,
        max_length=architecture.max_length,
        label_smoothing=architecture.label_smoothing,
    )
    assert config.norm_position == "pre" and config.dropout == 0.0
    # The preset's dropout and norm position stay overridable, and tiny keeps its own.
    assert TrainingConfig.from_flat(dropout=0.1).architecture.model_config().dropout == 0.1
    tiny = TrainingConfig.from_flat(model="tiny").architecture.model_config()
    assert tiny.norm_position == "post" and tiny.dropout == 0.1


def test_train_command_defaults_to_quick():
    from keras_transformer.cli import train

    parser = train.build_parser()
    assert train.training_config(parser.parse_args([])) == TrainingConfig()
    tiny = train.training_config(parser.parse_args(["--config", "tiny"]))
    assert tiny.architecture.model == "tiny"
    with pytest.raises(SystemExit):
        parser.parse_args(["--config", "huge"])


def test_quick_runs_evaluate_with_their_own_length_penalty():
    from keras_transformer.config import QUICK_EVAL_ALPHA, SearchOptions

    paper = SearchOptions().alpha
    assert paper == 0.6 and QUICK_EVAL_ALPHA == 1.2
    assert TrainingConfig().evaluation.eval_alpha is None
    assert TrainingConfig().eval_search() == SearchOptions(alpha=QUICK_EVAL_ALPHA)
    for model in ("tiny", "base", "big"):  # the paper's presets keep the paper's inference
        assert TrainingConfig.from_flat(model=model).eval_search() == SearchOptions()
    given = TrainingConfig.from_flat(eval_alpha=0.3, eval_beam_size=2).eval_search()
    assert (given.alpha, given.beam_size) == (0.3, 2)
    assert TrainingConfig.from_flat(model="base", eval_alpha=1.0).eval_search().alpha == 1.0
    with pytest.raises(ValueError, match="eval_alpha='high'"):
        TrainingConfig.from_flat(eval_alpha="high")


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
    assert common.search_options(given).stop_lookahead == "limit"
    given = parser.parse_args(["--model-dir", str(tmp_path), "--stop-lookahead", "next"])
    assert common.search_options(given).stop_lookahead == "next"


def test_train_command_exports_with_the_evaluated_search(monkeypatch):
    """The train command's export translates with the beam and alpha its test BLEU used."""
    from keras_transformer.cli import train
    from keras_transformer.runner import Runner
    from keras_transformer.serving import export

    seen = {}
    monkeypatch.setattr(export, "export_savedmodel", lambda *a, **k: seen.update(k) or "EXPORTED")
    cfg = train.training_config(train.build_parser().parse_args(["--eval-beam-size", "3"]))
    monkeypatch.setattr(train, "training_config", lambda args: cfg)
    monkeypatch.setattr(Runner, "final_weights", lambda self: ("W", None))
    monkeypatch.setattr(Runner, "write_summary", lambda self, summary, weights, choice=None: None)
    monkeypatch.setattr(
        "keras_transformer.training.trainer.train",
        lambda cfg, evaluator=None, end_of_run=None: {
            "chief": True,
            "steps": 1,
            "train_seconds": 1.0,
            "tokens_per_sec": 1.0,
            "step_seconds": 1.0,
        },  # fmt: skip
    )
    args = train.build_parser().parse_args(["--export-dir", "/tmp/unused"])
    assert train.train(args) == 0
    assert seen["search"] == cfg.eval_search()
    assert (seen["search"].alpha, seen["search"].beam_size) == (1.2, 3)


def test_quick_runs_train_under_a_time_limit():
    from keras_transformer.config import QUICK_TRAIN_MINUTES, train_minutes_for

    assert QUICK_TRAIN_MINUTES < 10  # the bound on the default command's training
    assert TrainingConfig().time_limit_seconds() == QUICK_TRAIN_MINUTES * 60
    for model in ("tiny", "base", "big"):
        assert train_minutes_for(model) == 0
        assert TrainingConfig.from_flat(model=model).time_limit_seconds() is None
    assert TrainingConfig.from_flat(train_minutes=0).time_limit_seconds() is None
    assert TrainingConfig.from_flat(model="base", train_minutes=2.5).time_limit_seconds() == 150
    # Multi-worker runs keep the limit: `RunControl`'s agreement stops every worker after the
    # same update.
    several = TrainingConfig.from_flat(strategy="multi_worker", train_minutes=3)
    assert several.time_limit_seconds() == 180
    for bad in (-1, "5", True, float("nan")):
        with pytest.raises(ValueError, match=r"train_minutes="):
            TrainingConfig.from_flat(train_minutes=bad)
    from keras_transformer.cli import train

    parser = train.build_parser()
    cfg = train.training_config(parser.parse_args(["--train-minutes", "0.5"]))
    assert cfg.recipe.train_minutes == 0.5


def test_a_planned_run_stopped_by_its_time_limit_reports_the_planned_steps():
    """`--time-budget-minutes 48 --train-minutes 40`: the report names the plan's last step,
    not the bound the config gives before any plan (budget / the shortest step)."""
    from keras_transformer.runner import Runner, RunResult

    cfg = TrainingConfig.from_flat(model="quick", time_budget_minutes=48, train_minutes=40)
    summary = dict(chief=True, steps=1974, stopped_by_time_limit=True, time_limit_seconds=2400.0,
                   plan=dict(total_steps=2122), train_seconds=2415.2, tokens_per_sec=1134.0,
                   step_seconds=2310.9, test={})  # fmt: skip
    lines = Runner(cfg, export_dir="none").report(RunResult(summary))
    assert cfg.step_limit() != 2122
    assert lines[0] == "stopped at step 1974 of 2122 by the 40-minute limit (--train-minutes)"
    unplanned = Runner(cfg, export_dir="none").report(RunResult({**summary, "plan": None}))
    assert unplanned[0].startswith(f"stopped at step 1974 of {cfg.step_limit()} by")


def test_train_command_stops_at_its_time_limit_and_finishes_the_run(tmp_path):
    """A limit shorter than the first step (its trace alone takes seconds) stops the run
    after one step, which is still checkpointed, averaged and summarized."""
    import json

    from keras_transformer.testing.runs import run, train_command, write_tsv

    tsv = tmp_path / "pairs.tsv"
    write_tsv(tsv, n=60)
    model_dir = tmp_path / "run"
    limit = ("--train-minutes", "0.005", "--average-last", "1")  # the later flags win
    result = run(train_command(tsv, model_dir, *limit, steps=50))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((model_dir / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["stopped_by_time_limit"] is True
    assert summary["time_limit_seconds"] == 0.3
    assert summary["averaged_checkpoints"] == ["ckpt-00000001.weights.h5"]
    assert (model_dir / "final.weights.h5").exists()
    assert "stopped at step 1 of 50 by the 0.005-minute limit" in result.stdout
