"""Recipes apart from architectures (`keras_transformer.recipes`): the paper's recipes resolved
for mocked machines, the default command resolved exactly as before recipes, flags winning
over a recipe, and every variation of the paper's Table 3 reachable from the command line."""

from __future__ import annotations

import pytest

from keras_transformer import recipes
from keras_transformer.config import TrainingConfig, TransformerConfig

# The paper's base model with a 37000 vocabulary and max_length 256, by hand: embeddings
# 37000 x 512; per layer pair an encoder (4 x (512^2 + 512) attention, 2 x 512 x 2048 + 2048
# + 512 FFN, 2 LayerNorms) and a decoder (two attentions, FFN, 3 LayerNorms).
BASE_PARAMETERS = 37000 * 512 + 6 * (
    (4 * (512 * 512 + 512) + 2 * 512 * 2048 + 2048 + 512 + 2 * 1024)
    + (8 * (512 * 512 + 512) + 2 * 512 * 2048 + 2048 + 512 + 3 * 1024)
)
# One update of 25000 tokens a side: 6 x parameters x tokens + attention (3 x 2 x length 32 x
# (h d_k + h d_v = 1024) x 6 layers x 3 x 25000).
BASE_UPDATE_FLOPS = 6 * BASE_PARAMETERS * 25000 + 3 * 2 * 32 * 1024 * 6 * 3 * 25000


def _step_and_cadence(peak_flops: float, eval_seconds: float, unit: int) -> tuple[float, int]:
    step = BASE_UPDATE_FLOPS / (peak_flops * 0.3)  # the recipes' assumed MFU
    steps = eval_seconds / (0.02 * step)  # 2% of the run
    return step, -(-int(steps) // unit) * unit


@pytest.mark.parametrize(
    "machine, replicas, batch, accumulate, precision, peak, eval_seconds, unit",
    [
        ("8xA100", 8, 3125, 1, "mixed_bfloat16", 8 * 312e12, 10.0, 1000),
        ("1xV100", 1, 3125, 8, "mixed_float16", 125e12, 10.0, 500),
        ("cpu", 1, 3125, 8, "CPU rule", 0.1e12, 300.0, 100),
    ],
)
def test_paper_base_resolves_for_a_mocked_machine(
    machine, replicas, batch, accumulate, precision, peak, eval_seconds, unit
):
    devices = recipes.Devices.parse(machine)
    cfg = recipes.complete(recipes.resolve("paper_base_en_de", devices))
    run, recipe, evaluation = cfg.run, cfg.recipe, cfg.evaluation
    # Checkpoints by time (the paper's 10 minutes), by steps only at the last step.
    assert run.checkpoint_every_minutes == 10.0
    assert run.checkpoint_every_steps == recipe.train_steps == 100_000
    assert run.average_last == run.keep_checkpoints == 5
    # The paper's batch, whatever the replicas: 25000 tokens an update.
    assert devices.replicas == replicas
    assert (recipe.batch_tokens, recipe.accumulate_steps) == (batch, accumulate)
    assert replicas * batch * accumulate == 25000
    assert cfg.distribution.mixed_precision == "auto"
    assert devices.auto_precision().startswith(precision)
    step, every = _step_and_cadence(peak, eval_seconds, unit)
    assert evaluation.eval_every_steps == every
    cost = recipes.dev_eval_cost(cfg, devices)
    assert cost["step_seconds"] == pytest.approx(step)
    assert eval_seconds / (every * step) == pytest.approx(cost["share"]) and cost["share"] < 0.02
    # The paper's recipe, the rest of it.
    assert (cfg.architecture.model, cfg.architecture.vocab_size, cfg.data.dataset) == (
        "base", 37000, "wmt14_en_de",
    )  # fmt: skip
    assert (recipe.warmup_steps, recipe.decay, cfg.architecture.dropout) == (4000, "rsqrt", 0.1)
    assert (evaluation.eval_beam_size, evaluation.eval_alpha) == (4, 0.6)
    lines = recipes.device_lines(cfg, devices)
    assert f"every {every} steps" in lines[2] and precision in lines[3]


def test_the_paper_recipes_differ_where_the_paper_does():
    a100 = recipes.Devices.parse("8xA100")
    big_de = recipes.complete(recipes.resolve("paper_big_en_de", a100))
    big_fr = recipes.complete(recipes.resolve("paper_big_en_fr", a100))
    base_fr = recipes.complete(recipes.resolve("paper_base_en_fr", a100))
    assert (big_de.architecture.dropout, big_fr.architecture.dropout) == (0.3, 0.1)
    assert big_de.run.average_last == big_de.run.keep_checkpoints == 20
    assert big_de.recipe.train_steps == 300_000 and big_de.architecture.d_model == 1024
    assert (base_fr.architecture.vocab_size, base_fr.data.dataset) == (32000, "wmt14_en_fr")
    two_machines = recipes.Devices.parse("2x8xH100")
    several = recipes.complete(recipes.resolve("paper_base_en_de", two_machines))
    assert several.distribution.strategy == "multi_worker" and two_machines.replicas == 16
    # A cadence past the run's end evaluates at the end only.
    assert several.evaluation.eval_every_steps == several.recipe.train_steps


def test_parameter_count_equals_the_models():
    from keras_transformer import build_transformer

    base = TransformerConfig.base(37000, max_length=256)
    assert recipes.parameter_count(base) == BASE_PARAMETERS
    odd = TransformerConfig.tiny(
        300, num_layers=1, d_k=8, d_v=24, positional_encoding="learned", norm_position="pre",
        share_embeddings=False, max_length=40,
    )  # fmt: skip
    assert recipes.parameter_count(odd) == build_transformer(odd).count_params()


def test_the_default_command_resolves_as_before_recipes():
    """`python pipelines/train_wmt.py` resolves to today's values: the defaults of
    `TrainingConfig()` with today's rules applied by hand (the quick model's sizes, a
    ten-minute budget, 9.5 minutes of training, alpha 1.2, the planned run's decay, no dropout
    on the bundled corpus)."""
    from keras_transformer.cli import train
    from keras_transformer.runner import resolve_config

    resolved = resolve_config(train.training_config(train.build_parser().parse_args([])))
    today = TrainingConfig()
    expected = {
        **today.to_flat(),
        "num_layers": 2, "d_model": 128, "d_ff": 512, "num_heads": 4, "d_k": 32, "d_v": 32,
        "norm_position": "pre", "positional_encoding": "sinusoidal", "dropout": 0.0,
        "time_budget_minutes": 10.0, "train_minutes": 9.5, "eval_alpha": 1.2,
        "decay": "rsqrt_cooldown", "train_steps": None,
    }  # fmt: skip
    assert resolved.to_flat() == expected
    assert resolved.architecture.model_config() == today.architecture.model_config()
    for method in ("budget_seconds", "time_limit_seconds", "step_limit", "resolved_decay"):
        assert getattr(resolved, method)() == getattr(today, method)(), method
    assert resolved.eval_search() == today.eval_search()


@pytest.mark.parametrize(
    "flags",
    [
        {"model": "tiny"},
        {"model": "base", "train_steps": 300},
        {"strategy": "multi_worker"},
        {"model": "tiny", "time_budget_minutes": 3.0},
        {"dropout": 0.2, "eval_alpha": 0.9, "train_minutes": 1.0},
    ],
)
def test_cpu_quick_keeps_what_each_preset_did(flags):
    """Under the default recipe every preset runs as before: the methods that read the
    Nones give the same answers on the completed config."""
    before = TrainingConfig.from_flat(**flags)
    after = recipes.complete(recipes.resolve("cpu_quick", recipes.Devices.cpu(), **flags))
    for method in ("budget_seconds", "time_limit_seconds", "step_limit", "resolved_decay"):
        assert getattr(after, method)() == getattr(before, method)(), method
    assert after.eval_search() == before.eval_search()
    assert after.architecture.model_config() == before.architecture.model_config()


def test_flags_given_win_over_the_recipe():
    from keras_transformer.cli import train

    parser = train.build_parser()
    common = ["--print-config", "--mock-devices", "1xV100", "--recipe", "paper_big_en_fr"]
    # 400 is the field's default, given explicitly: it wins over the recipe's 4000.
    cfg = train.training_config(parser.parse_args([*common, "--warmup-steps", "400"]))
    assert (cfg.recipe.warmup_steps, cfg.architecture.dropout, cfg.run.average_last) == (
        400, 0.1, 20,
    )  # fmt: skip
    accumulated = train.training_config(parser.parse_args([*common, "--accumulate-steps", "2"]))
    assert (accumulated.recipe.batch_tokens, accumulated.recipe.accumulate_steps) == (12500, 2)
    with pytest.raises(ValueError, match="--mock-devices=8xA100"):
        train.training_config(parser.parse_args(["--mock-devices", "8xA100"]))


def test_every_row_of_table_3_is_a_flag():
    from keras_transformer.cli import train

    argv = "--num-layers 4 --d-model 256 --d-ff 1024 --num-heads 8 --d-k 16 --d-v 48 "
    argv += "--dropout 0.2 --label-smoothing 0.2 --positional-encoding learned"
    cfg = train.training_config(train.build_parser().parse_args(argv.split()))
    model = recipes.complete(cfg).architecture.model_config()
    assert (model.num_layers, model.d_model, model.d_ff, model.num_heads) == (4, 256, 1024, 8)
    assert (model.d_k, model.d_v, model.dropout, model.label_smoothing) == (16, 48, 0.2, 0.2)
    assert model.positional_encoding == "learned"


@pytest.mark.parametrize("text", ["8xB200", "0xA100", "A100", "8x", "x8xA100", "gpu"])
def test_a_bad_machine_is_named(text):
    with pytest.raises(ValueError, match=f"Received: devices='{text}'"):
        recipes.Devices.parse(text)


def test_print_config_command(capsys):
    from keras_transformer.cli import train

    argv = ["--recipe", "paper_base_en_de", "--print-config", "--mock-devices", "8xA100"]
    assert train.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0]
        == "recipe paper_base_en_de on 8 x A100 (compute capability 8.0, 80 GB): 8 replica(s)"
    )
    assert out[1] == "checkpoints: every 10 minutes or 100000 steps, keep 5, average the last 5"
    assert out[3] == "precision: auto -> mixed_bfloat16"
    assert any(line.startswith("recipe: recipe_name='paper_base_en_de'") for line in out)


@pytest.mark.slow
def test_gpu_check_smoke_run_on_a_cpu(tmp_path):
    """`benchmarks/run.py gpu check` without a GPU: refused with status 2 and one line, and
    its CPU smoke mode trains both precisions and prints every figure."""
    import json
    import subprocess
    import sys

    command = [sys.executable, "benchmarks/run.py", "gpu", "check"]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "TensorFlow sees no GPU" in refused.stderr
    smoke = ["--allow-cpu", "--steps", "3", "--config", "tiny", "--vocab-size", "8000"]
    smoke += ["--probe-batches", "5", "--work-dir", str(tmp_path)]
    result = subprocess.run(command + smoke, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout.strip().splitlines()[-1])
    assert [row["precision"] for row in rows] == ["mixed_bfloat16", "mixed_float16"]
    for row in rows:
        assert row["step_seconds"] > 0 and row["checkpoint_seconds"] > 0
        assert row["input_batches_per_s"] > 0 and row["mfu"] is None  # no peak on a CPU
    assert rows[1]["loss_scale"] is not None  # float16 scales its loss
