"""Training recipes: what a job sets besides the architecture, resolved for a machine.

An architecture preset (`TransformerConfig.quick/tiny/base/big`) is sizes only. A recipe is the
rest of a job: data, vocabulary, batch, schedule, length, checkpoints, evaluations, precision.
It is resolved for the machine it runs on (`Devices`: GPUs, their kind, workers), then every
field it leaves None is filled by one rule (`complete`), so the run prints and saves a fully
resolved `TrainingConfig` (`runner.resolve_config`, `MODEL_DIR/training_config.json`):

    devices = Devices.parse("8xA100")                      # or Devices.cpu(), or detected
    cfg = recipes.resolve("paper_base_en_de", devices, train_steps=1000)  # given flags win
    cfg = recipes.complete(cfg)                            # no None left that a module fills
    print("\\n".join(recipes.device_lines(cfg, devices) + recipes.config_lines(cfg)))

`cpu_quick` is the default command's recipe and sets nothing: the rules that `complete`
applies (the quick model's ten-minute budget, 9.5 training minutes and alpha 1.2; the paper's
alpha and no time limit for the other presets) are today's, written in `config.run_defaults`
(`budget_minutes_for`, `train_minutes_for`, `eval_alpha_for`), and its dropout by corpus size
is `training.regularization`'s. The paper's recipes (section 5, Table 3) are GPU-shaped:
25000 tokens an update whatever the replica count, checkpoints every 10 minutes, the last 5
(base) or 20 (big) averaged, dev BLEU at a cadence that costs under 2% of the run, precision
"auto" (by the GPU's compute capability: `keras_transformer.precision`).

Plain Python: no TensorFlow import (the command detects the devices: `cli.train`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from keras_transformer.checks import check_choice, check_int
from keras_transformer.config import (
    DEFAULT_TRAIN_STEPS,
    PRESET_OVERRIDES,
    RECIPES,
    TrainingConfig,
    TransformerConfig,
    budget_minutes_for,
    eval_alpha_for,
    train_minutes_for,
)
from keras_transformer.precision import resolve_mixed_precision

DEFAULT_RECIPE = RECIPES[0]
PAPER_BATCH_TOKENS = 25_000  # source (and target) tokens of one update (paper, section 5.1)
# The paper's share of one GPU: 25000 tokens over 8 P100s of 16 GB. A replica takes this many
# tokens per 16 GB of its GPU's memory (up to the whole batch); the rest is accumulated.
PAPER_REPLICA_TOKENS = PAPER_BATCH_TOKENS // 8
PAPER_GPU_MEMORY_GB = 16.0
CHECKPOINT_MINUTES = 10.0  # the paper's checkpoint interval (section 6.1)
DEV_EVAL_SHARE = 0.02  # the most of a run's time its dev-BLEU evaluations may take
# Estimates, until the GPU check (benchmarks/gpu_check.py) measures them: the share of a GPU's
# 16-bit peak a training step reaches (NVIDIA's Transformer-big figures on A100 are near 0.4),
# a CPU's effective float32 rate, and a dev evaluation's seconds (200 pairs, greedy: on a GPU
# about 100 decoding steps of a few milliseconds per batch of 64, plus tokenization and BLEU;
# on a CPU, the default run's few seconds scaled by the larger models' width and vocabulary).
ASSUMED_MFU = 0.3
CPU_TFLOPS = 0.1
DEV_EVAL_SECONDS = {  # (on a GPU, architecture preset) -> seconds
    (True, "quick"): 5.0, (True, "tiny"): 5.0, (True, "base"): 10.0, (True, "big"): 20.0,
    (False, "quick"): 10.0, (False, "tiny"): 15.0, (False, "base"): 300.0, (False, "big"): 900.0,
}  # fmt: skip
TYPICAL_LENGTH = 32  # padded pieces of a WMT14 sentence (about 27 on average with 37000 BPE)


@dataclass(frozen=True)
class GpuKind:
    """A GPU model: its compute capability, memory and dense 16-bit tensor-core peak
    (bfloat16 where it has it, else float16), in TFLOPS."""

    name: str
    compute_capability: tuple[int, int]
    memory_gb: float
    peak_tflops: float | None


GPU_KINDS = {
    kind.name: kind
    for kind in (
        GpuKind("V100", (7, 0), 16.0, 125.0),  # SXM2; float16 only
        GpuKind("T4", (7, 5), 16.0, 65.0),
        GpuKind("A100", (8, 0), 80.0, 312.0),
        GpuKind("L4", (8, 9), 24.0, 121.0),
        GpuKind("H100", (9, 0), 80.0, 989.0),  # SXM
        GpuKind("H200", (9, 0), 141.0, 989.0),
    )
}


@dataclass(frozen=True)
class Devices:
    """The machine a recipe is resolved for.

    Args:
        gpus: GPUs per worker (0: CPU only).
        gpu: their kind (None on a CPU).
        workers: processes of a cluster (TF_CONFIG), each with `gpus` GPUs.
    """

    gpus: int = 0
    gpu: GpuKind | None = None
    workers: int = 1

    def __post_init__(self) -> None:
        check_int("gpus", self.gpus, minimum=0)
        check_int("workers", self.workers)
        if (self.gpus > 0) != (self.gpu is not None):
            raise ValueError(f"A GPU kind goes with gpus > 0. Received: gpus={self.gpus}")

    @classmethod
    def cpu(cls, workers: int = 1) -> Devices:
        return cls(0, None, workers)

    @classmethod
    def parse(cls, text: str) -> Devices:
        """`"cpu"`, `"GPUSxKIND"` (`"8xA100"`) or `"WORKERSxGPUSxKIND"` (`"2x8xH100"`);
        KIND one of `GPU_KINDS`."""
        parts = text.split("x") if text != "cpu" else []
        digits = all(p.isdigit() and int(p) > 0 for p in parts[:-1])
        if text != "cpu" and (len(parts) not in (2, 3) or not digits or parts[-1] not in GPU_KINDS):
            raise ValueError(
                "devices must be cpu, GPUSxKIND or WORKERSxGPUSxKIND with KIND one of "
                f"{sorted(GPU_KINDS)}. Received: devices={text!r}"
            )
        if not parts:
            return cls.cpu()
        workers = int(parts[0]) if len(parts) == 3 else 1
        return cls(int(parts[-2]), GPU_KINDS[parts[-1]], workers)

    @property
    def replicas(self) -> int:
        return max(self.gpus, 1) * self.workers

    def describe(self) -> str:
        workers = f"{self.workers} workers x " if self.workers > 1 else ""
        if not self.gpus:
            return f"{workers}CPU"
        major, minor = self.gpu.compute_capability
        return (
            f"{workers}{self.gpus} x {self.gpu.name} (compute capability {major}.{minor}, "
            f"{self.gpu.memory_gb:g} GB)"
        )

    def auto_precision(self) -> str:
        """What `--mixed-precision auto` gives here (`keras_transformer.precision`'s rule):
        bfloat16 from compute capability 8.0, float16 (loss scaling) on 7.x, float32 below."""
        if not self.gpus:
            return "CPU rule: mixed_bfloat16 with AVX512_BF16 or AMX, else none (float32)"
        return resolve_mixed_precision("auto", [self.gpu.compute_capability] * self.gpus)

    def replica_tokens(self) -> int:
        """Tokens one replica takes per batch in a paper recipe: the paper's 3125 per 16 GB
        of GPU memory, at most the whole batch; a CPU takes the paper's share."""
        if not self.gpus:
            return PAPER_REPLICA_TOKENS
        share = PAPER_REPLICA_TOKENS * self.gpu.memory_gb / PAPER_GPU_MEMORY_GB
        return min(int(share), PAPER_BATCH_TOKENS)

    def peak_flops(self) -> float:
        """The machine's training FLOP/s before `ASSUMED_MFU`: GPUs' 16-bit peak (a GPU of
        unknown peak counts as a V100), or `CPU_TFLOPS` per worker."""
        if not self.gpus:
            return CPU_TFLOPS * 1e12 * self.workers
        return (self.gpu.peak_tflops or GPU_KINDS["V100"].peak_tflops) * 1e12 * self.replicas


# Model FLOPs ---------------------------------------------------------------------------------


def parameter_count(config: TransformerConfig) -> int:
    """The model's parameters, counted from its sizes (equal to `build_transformer(config)
    .count_params()`, which tests check)."""
    d, h, d_k, d_v = config.d_model, config.num_heads, config.d_k, config.d_v
    attention = 2 * (d * h * d_k + h * d_k) + (d * h * d_v + h * d_v) + (h * d_v * d + d)
    ffn = 2 * d * config.d_ff + config.d_ff + d
    norm = 2 * d
    layers = config.num_layers * ((attention + ffn + 2 * norm) + (2 * attention + ffn + 3 * norm))
    final_norms = 2 * norm if config.norm_position == "pre" else 0
    embeddings = config.vocab_size * d * (1 if config.share_embeddings else 2)
    learned = 2 * config.max_length * d if config.positional_encoding == "learned" else 0
    return layers + final_norms + embeddings + learned


def train_flops(config: TransformerConfig, tokens: float, length: float) -> float:
    """FLOPs of one update on `tokens` source and `tokens` target tokens in sentences of
    `length` pieces: 6 x parameters x tokens (forward and backward; each weight sees one side's
    tokens) plus attention's two products (QK^T, AV: 2 x length x (h d_k + h d_v) per token and
    layer, forward), in the encoder (source), the decoder's self- and cross-attention
    (target), times 3 for the backward pass."""
    heads = config.num_heads * (config.d_k + config.d_v)
    attention = 3 * 2 * length * heads * config.num_layers * (tokens + 2 * tokens)
    return 6.0 * parameter_count(config) * tokens + attention


# Recipes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """A job: `values(devices, given)` returns the flat `TrainingConfig` fields it sets for
    `devices`, knowing the flags `given` (which then win over them)."""

    name: str
    summary: str
    values: Callable[[Devices, dict[str, Any]], dict[str, Any]]
    uses_devices: bool = True


def _cpu_quick(devices: Devices, given: dict[str, Any]) -> dict[str, Any]:
    return {}  # today's defaults and `complete`'s rules: the default command unchanged


def paper_batch(devices: Devices, given: dict[str, Any]) -> dict[str, int]:
    """`batch_tokens` per replica and `accumulate_steps` for the paper's 25000 tokens an
    update: a given one of the two sets the other; else each replica takes
    `Devices.replica_tokens` and updates accumulate what the replicas cannot take at once."""
    replicas = devices.replicas
    if "batch_tokens" in given and "accumulate_steps" not in given:
        steps = max(1, round(PAPER_BATCH_TOKENS / (replicas * given["batch_tokens"])))
        return {"accumulate_steps": steps}
    steps = given.get("accumulate_steps")
    if steps is None:
        steps = math.ceil(PAPER_BATCH_TOKENS / (replicas * devices.replica_tokens()))
    return {
        "batch_tokens": round(PAPER_BATCH_TOKENS / (replicas * steps)),
        "accumulate_steps": steps,
    }


def _nice(steps: float) -> int:
    """`steps` rounded up to a multiple of 100 (under 1000), 500 (under 10000) or 1000."""
    unit = 100 if steps < 1000 else 500 if steps < 10_000 else 1000
    return max(unit, math.ceil(steps / unit) * unit)


def dev_eval_cost(cfg: TrainingConfig, devices: Devices) -> dict[str, float]:
    """The estimate behind a paper recipe's dev-BLEU cadence, for `cfg` on `devices`:

        step_seconds = train_flops(model, global tokens an update, TYPICAL_LENGTH)
                       / (peak FLOP/s of all replicas x ASSUMED_MFU)
        eval_seconds = DEV_EVAL_SECONDS[(GPU?, preset)]      (every replica waits for it)
        every_steps  = eval_seconds / (DEV_EVAL_SHARE x step_seconds), rounded up (`_nice`)
        share        = eval_seconds / (eval_every_steps x step_seconds)

    e.g. base on 8 x A100: 9.55e12 FLOPs / (8 x 312e12 x 0.3) = 0.0128 s a step, and 10 s of
    evaluation is 2% of 10 / (0.02 x 0.0128) = 39,200 steps: every 40,000; on 1 x V100,
    9.55e12 / (125e12 x 0.3) = 0.255 s a step: every 10 / (0.02 x 0.255) = 1,961 -> 2,000."""
    recipe = cfg.recipe
    tokens = devices.replicas * recipe.accumulate_steps * recipe.batch_tokens
    model = cfg.architecture.model_config()
    step = train_flops(model, tokens, TYPICAL_LENGTH) / (devices.peak_flops() * ASSUMED_MFU)
    key = (devices.gpus > 0, cfg.architecture.model)
    evaluation = DEV_EVAL_SECONDS[key]
    every = cfg.evaluation.eval_every_steps
    return {
        "step_seconds": step,
        "eval_seconds": evaluation,
        "every_steps": _nice(evaluation / (DEV_EVAL_SHARE * step)),
        "share": evaluation / (every * step) if every else 0.0,
    }


def _paper(preset: str, pair: str) -> Callable[[Devices, dict[str, Any]], dict[str, Any]]:
    """The paper's recipe for `preset` ("base", "big") on WMT14 `pair` ("en_de", "en_fr")."""

    def values(devices: Devices, given: dict[str, Any]) -> dict[str, Any]:
        big = given.get("model", preset) == "big"  # a given --config shapes steps and averaging
        steps = given.get("train_steps", 300_000 if big else 100_000)
        average = 20 if big else 5
        values = {
            "model": preset,
            "dataset": f"wmt14_{pair}",
            "vocab_size": 37_000 if pair == "en_de" else 32_000,
            "max_length": 256,
            "dropout": 0.3 if big and pair == "en_de" else 0.1,  # big En-Fr: 0.1
            "label_smoothing": 0.1,
            "train_steps": steps,
            "train_minutes": 0.0,
            "time_budget_minutes": 0.0,
            "warmup_steps": 4000,
            "decay": "rsqrt",
            "eval_alpha": 0.6,
            "eval_beam_size": 4,
            "strategy": "multi_worker" if devices.workers > 1 else "auto",
            "mixed_precision": "auto",
            "model_dir": f"runs/paper_{preset}_{pair}",
            "steps_per_epoch": 1000,  # a validation pass: a few forward batches, < 0.5%
            # Checkpoints by time; by steps only at the last one.
            "checkpoint_every_minutes": CHECKPOINT_MINUTES,
            "checkpoint_every_steps": steps,
            "keep_checkpoints": average,
            "average_last": average,
            "log_every_steps": 100,
            **paper_batch(devices, given),
        }
        cadence = TrainingConfig.from_flat(**{**values, **given})
        every = int(dev_eval_cost(cadence, devices)["every_steps"])
        values["eval_every_steps"] = min(every, steps)  # beyond the run: at its end only
        return values

    return values


def _own_corpus(devices: Devices, given: dict[str, Any]) -> dict[str, Any]:
    """A user's `--dataset`: on a CPU the quick model planned to an hour (dropout by corpus
    size, as `cpu_quick`); on GPUs the paper's base recipe with a 16000-piece vocabulary,
    stopped after 5 dev evaluations without a BLEU gain."""
    if not devices.gpus:
        return {"model_dir": "runs/own_corpus", "time_budget_minutes": 60.0, "train_minutes": 0.0}
    values = _paper("base", "en_de")(devices, given)
    del values["dataset"]
    return {**values, "vocab_size": 16_000, "model_dir": "runs/own_corpus", "early_stopping": 5}


RECIPE_TABLE = {
    recipe.name: recipe
    for recipe in (
        Recipe("cpu_quick", "the default ten-minute CPU run", _cpu_quick, uses_devices=False),
        Recipe("paper_base_en_de", "Transformer base, WMT14 En-De", _paper("base", "en_de")),
        Recipe("paper_big_en_de", "Transformer big, WMT14 En-De", _paper("big", "en_de")),
        Recipe("paper_base_en_fr", "Transformer base, WMT14 En-Fr", _paper("base", "en_fr")),
        Recipe("paper_big_en_fr", "Transformer big, WMT14 En-Fr", _paper("big", "en_fr")),
        Recipe("own_corpus", "your --dataset, shaped for the devices", _own_corpus),
    )
}


def get(name: str) -> Recipe:
    check_choice("recipe", name, RECIPES)
    return RECIPE_TABLE[name]


def resolve(name: str, devices: Devices, **given: Any) -> TrainingConfig:
    """The `TrainingConfig` of recipe `name` on `devices`, the flags `given` (flat names)
    winning over the recipe's values. Fields neither sets stay at their defaults, None
    included: `complete` fills those once the run's files are known."""
    values = {**get(name).values(devices, given), **given, "recipe_name": name}
    return TrainingConfig.from_flat(**values)


def complete(cfg: TrainingConfig) -> TrainingConfig:
    """`cfg` with every None that a module would otherwise resolve filled in, by the rules
    the modules used: the architecture's sizes (its preset's, `ArchitectureConfig.model_config`;
    the quick preset's dropout is left to `training.regularization`, which reads the corpus),
    the time budget, training minutes and evaluation alpha of its preset (`config.run_defaults`'s
    `*_for`), a train-step count for a run not planned to a budget and the decay
    (`TrainingConfig.resolved_decay`)."""
    arch, recipe = cfg.architecture, cfg.recipe
    model = arch.model_config()
    fill = [n for n in PRESET_OVERRIDES if not (n == "dropout" and arch.model == "quick")]
    changes = {name: getattr(model, name) for name in fill if getattr(arch, name) is None}
    if recipe.time_budget_minutes is None:  # one process plans a budget: not multi_worker
        several = cfg.distribution.strategy == "multi_worker"
        changes["time_budget_minutes"] = 0.0 if several else budget_minutes_for(arch.model)
    if recipe.train_minutes is None:
        changes["train_minutes"] = train_minutes_for(arch.model)
    if cfg.evaluation.eval_alpha is None:
        changes["eval_alpha"] = eval_alpha_for(arch.model)
    cfg = cfg.replace(**changes)
    if cfg.recipe.train_steps is None and not cfg.planned():
        cfg = cfg.replace(train_steps=DEFAULT_TRAIN_STEPS)
    return cfg.replace(decay=cfg.resolved_decay())


# What a run prints ---------------------------------------------------------------------------


def config_lines(cfg: TrainingConfig) -> list[str]:
    """Every field of `cfg`, one line per section: `recipe: recipe_name=cpu_quick, ...`."""
    flat, lines = cfg.to_flat(), []
    for section, field in cfg.flat_fields():
        if not lines or not lines[-1].startswith(section.name + ":"):
            lines.append(f"{section.name}:")
        lines[-1] += f" {field.name}={flat[field.name]!r},"
    return [line.rstrip(",") for line in lines]


def device_lines(cfg: TrainingConfig, devices: Devices) -> list[str]:
    """The resolved choices that depend on `devices`: checkpoints, averaging, dev-BLEU
    cadence (with its estimated cost), precision and the batch."""
    run, recipe, evaluation = cfg.run, cfg.recipe, cfg.evaluation
    replicas, steps = devices.replicas, recipe.accumulate_steps
    cost = dev_eval_cost(cfg, devices)
    precision = cfg.distribution.mixed_precision
    if precision == "auto":
        precision = f"auto -> {devices.auto_precision()}"
    cadence = "never"
    if evaluation.eval_every_steps:
        cadence = (
            f"every {evaluation.eval_every_steps} steps (estimate: {cost['step_seconds']:.3g} "
            f"s a step, {cost['eval_seconds']:g} s an evaluation: {100 * cost['share']:.2g}% "
            "of the run)"
        )
    return [
        f"recipe {recipe.recipe_name} on {devices.describe()}: {replicas} replica(s)",
        f"checkpoints: every {run.checkpoint_every_minutes:g} minutes or "
        f"{run.checkpoint_every_steps} steps, keep {run.keep_checkpoints}, average the last "
        f"{run.average_last}",
        f"dev BLEU: {cadence}",
        f"precision: {precision}",
        f"batch: {recipe.batch_tokens} tokens per replica x {replicas} replica(s) x {steps} "
        f"micro-batch(es) = {recipe.batch_tokens * replicas * steps} tokens an update",
    ]
