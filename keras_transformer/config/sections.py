"""The sections of a `TrainingConfig` (`config.training`), each a frozen dataclass whose fields
are also the training command's flags (`option`): the architecture, the data, the recipe,
the evaluations, the warm start, the distribution and the run's plumbing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from keras_transformer.checks import check_choice, check_int, check_number
from keras_transformer.config.inference import SearchOptions
from keras_transformer.config.model import PRESETS, TransformerConfig
from keras_transformer.config.run_defaults import DEFAULT_TRAIN_STEPS, eval_alpha_for
from keras_transformer.constants import DECAYS, NORM_POSITIONS, POSITIONAL_ENCODINGS

STRATEGIES = ("auto", "mirrored", "one_device", "multi_worker")
MIXED_PRECISION = ("auto", "none", "mixed_bfloat16", "mixed_float16")
EVAL_DECODES = ("greedy", "beam")  # how training decodes its dev subset
DELIVERIES = ("averaged", "best")  # which weights a run delivers
FREEZE_CHOICES = ("encoder", "embeddings")  # parts of the model a run may leave untrained
# ArchitectureConfig fields that override a preset's value where set (None: the preset's).
PRESET_OVERRIDES = (
    "dropout", "num_layers", "d_model", "d_ff", "num_heads", "d_k", "d_v", "norm_position",
    "positional_encoding",
)  # fmt: skip
# The training recipes (`keras_transformer.recipes`: what a job sets besides the architecture,
# resolved for a machine); the first is the default command's.
RECIPES = (
    "cpu_quick", "paper_base_en_de", "paper_big_en_de", "paper_base_en_fr", "paper_big_en_fr",
    "own_corpus",
)  # fmt: skip


def option(default: Any, help: str, **cli: Any) -> Any:
    """A field of a `TrainingConfig` section, which is also a flag of the training command
    (`cli.common.add_config_arguments`): its `default` and its `help`, written here only (the
    command adds "(default: ...)"). `cli` holds what the field's name and type do not say:
    `flag` (the flag's name, else `--field-name`) and `choices`. The flag parses a value with
    the field's type (`int | None`: int; a bool field is a switch)."""
    return dataclasses.field(default=default, metadata={"help": help, **cli})


def _section(factory: type, title: str) -> Any:
    """A section of `TrainingConfig`; `title` heads its flags in `--help`."""
    return dataclasses.field(default_factory=factory, metadata={"title": title})


@dataclass(frozen=True)
class ArchitectureConfig:
    """The model a run trains: a `TransformerConfig` preset, the vocabulary and length it is
    built for, and the preset's values a run overrides (None: the preset's)."""

    model: str = option(
        "quick",
        "architecture preset: quick (tiny widths, 2 layers, pre-norm, no dropout: the "
        "cpu_quick recipe's), tiny, base (paper, 65M), big (paper, 213M)",
        flag="--config",
        choices=PRESETS,
    )
    vocab_size: int = option(
        4000, "shared SentencePiece BPE vocabulary size (paper: 37000 En-De, 32000 En-Fr)"
    )
    # Also the model's limit (TransformerConfig.max_length).
    max_length: int = option(128, "longest sentence in subword pieces kept for training")
    label_smoothing: float = option(0.1, "epsilon of label smoothing (paper: 0.1)")
    dropout: float | None = option(
        None,
        "override the preset's dropout (paper: 0.1 base, 0.3 big En-De; quick: 0.1 on a "
        "corpus under 300,000 source words, else none)",
    )
    num_layers: int | None = option(
        None, "override the preset's number of encoder and decoder layers (N)"
    )
    d_model: int | None = option(None, "override the preset's model width")
    d_ff: int | None = option(None, "override the preset's feed-forward inner width")
    num_heads: int | None = option(None, "override the preset's number of attention heads")
    d_k: int | None = option(
        None, "width of queries and keys per head (Table 3 rows A-B; default d_model / heads)"
    )
    d_v: int | None = option(
        None, "width of values per head (Table 3 row A; default d_model / heads)"
    )
    norm_position: str | None = option(
        None,
        "override the preset's LayerNorm placement: post (paper) or pre",
        choices=NORM_POSITIONS,
    )
    positional_encoding: str | None = option(
        None,
        "sinusoidal (paper) or learned (Table 3 row E: learned positional embeddings)",
        choices=POSITIONAL_ENCODINGS,
    )

    def __post_init__(self) -> None:
        check_choice("model", self.model, PRESETS)
        check_int("vocab_size", self.vocab_size)
        check_int("max_length", self.max_length)

    def model_config(self, vocab_size: int | None = None) -> TransformerConfig:
        """The `TransformerConfig` of this run (the tokenizer's real vocab size wins)."""
        overrides: dict[str, Any] = {
            "max_length": self.max_length,
            "label_smoothing": self.label_smoothing,
        }
        for name in PRESET_OVERRIDES:
            if getattr(self, name) is not None:
                overrides[name] = getattr(self, name)
        return TransformerConfig.preset(self.model, vocab_size or self.vocab_size, **overrides)


@dataclass(frozen=True)
class DataConfig:
    """The parallel text of a run: what `keras_transformer.data.corpus.read_split` reads as
    its "train", "dev" and "test" splits."""

    dataset: str = option(
        "sample_en_de",
        "sample_en_de | sample_en_fr (bundled) | wmt14_en_de | wmt14_en_fr (TFDS) | tsv:PATH "
        "(source<TAB>target lines) | text:SRC,TGT (two files, one sentence a line); several "
        "weighted corpora: SPEC@WEIGHT+SPEC@WEIGHT, e.g. sample_en_de+tsv:own.tsv@3 (an epoch "
        "takes round(WEIGHT x size) pairs of each; dev and test: the first corpus's). Without "
        "dev/test files, dev and test are carved off the train file (1% each, by normalized "
        "source: no dev/test source is also in train)",
    )
    dev_dataset: str | None = option(
        None,
        "dev split read whole from this tsv:PATH or text:SRC,TGT (default: the dataset's own; "
        "see also --dev-source/--dev-target)",
    )
    test_dataset: str | None = option(
        None,
        "test split read whole from this tsv:PATH or text:SRC,TGT (default: the dataset's own; "
        "see also --test-source/--test-target)",
    )
    reverse: bool = option(
        False,
        "swap source and target of every split: translate target -> source language (e.g. "
        "German -> English with sample_en_de); dev and test BLEU use the swapped references",
    )
    data_dir: str | None = option(None, "TFDS data directory for the WMT datasets")
    data_service: str | None = option(
        None,
        "tf.data service dispatcher (grpc://HOST:PORT) whose workers run the training input "
        "pipeline, for input that outgrows this host's cores (BUILD.md); a prepared:DIR or "
        "wmt14_* dataset (graph-only readers), files the service's workers can read",
    )

    def split_dataset(self, split: str) -> tuple[str, str]:
        """`(dataset, split of it)` that the run reads as its "train", "dev" or "test" split:
        an explicit `dev_dataset`/`test_dataset` is read whole ("all"), else `dataset`'s own
        split (read both with `keras_transformer.data.corpus.read_split`)."""
        explicit = {"train": None, "dev": self.dev_dataset, "test": self.test_dataset}
        if split not in explicit:
            raise ValueError(f"split must be train, dev or test. Received: split={split!r}")
        return (self.dataset, split) if explicit[split] is None else (explicit[split], "all")


@dataclass(frozen=True)
class RecipeConfig:
    """How the model learns (paper, section 5): the run's length, its batches and the
    learning-rate schedule. A run's length is `train_steps`, else planned to a time budget
    (`time_budget_minutes`, `training.budget`), else `DEFAULT_TRAIN_STEPS`
    (`TrainingConfig.step_limit`)."""

    # `keras_transformer.recipes`: each fills the fields it sets (a flag given wins), then
    # `recipes.complete` fills every field left None.
    recipe_name: str = option(
        RECIPES[0],
        "the job, resolved for this machine's devices into every field below (a flag given "
        "on the command line wins): cpu_quick (the ten-minute CPU run: --config quick's time "
        "budget, alpha 1.2 and dropout by corpus size), paper_base_en_de, paper_big_en_de, "
        "paper_base_en_fr, paper_big_en_fr (the paper's WMT14 recipes, GPU-shaped: 25000 "
        "tokens an update, checkpoints every 10 minutes, dev BLEU under 2% of the run), "
        "own_corpus (your --dataset: quick on a CPU, base on GPUs); --print-config shows it",
        flag="--recipe",
        choices=RECIPES,
    )
    # A resumed run continues up to this.
    train_steps: int | None = option(
        None,
        "total optimizer updates (default: planned to --time-budget-minutes when there is a "
        "budget, else 2000)",
    )
    # `train_minutes_for` resolves None. It counts this process's time: a resumed run gets
    # the limit again; under multi_worker each worker counts its own (`RunControl`'s one agreement).
    train_minutes: float | None = option(
        None,
        "stop training before a step that would end past N minutes of wall clock (evaluations "
        "included), even before --train-steps; then checkpoint, average, evaluate and export "
        "as usual. Default: 9.5 for --config quick (the default command trains in at most ten "
        "minutes on any CPU), no limit for the others; 0: no limit. With several workers the "
        "first to reach it stops all of them after the same step",
    )
    # `budget_minutes_for` resolves None; ignored with `train_steps`.
    time_budget_minutes: float | None = option(
        None,
        "the whole run's budget in minutes, from start to export, that a run without "
        "--train-steps plans its steps to: it measures the step time after the first steps, "
        "records the plan in MODEL_DIR/plan.json and decays the learning rate to zero at the "
        "planned last step (a rerun follows the recorded plan). Default: 10 for --config "
        "quick, none for the others; 0: none",
    )
    batch_tokens: int = option(
        1536,
        "padded source/target tokens per replica batch; global = this x replicas (paper: "
        "25000 global)",
    )
    accumulate_steps: int = option(
        1,
        "average the gradients of K micro-batches into one update (gradient accumulation); "
        "steps, schedule and intervals count updates, each of K x replicas x batch-tokens "
        "tokens (paper's 25000 on one GPU: --batch-tokens 3125 --accumulate-steps 8)",
    )
    warmup_steps: int = option(
        400, "linear warm-up steps of the learning-rate schedule (paper: 4000)"
    )
    learning_rate_scale: float = option(1.0, "constant factor on the paper's learning-rate formula")
    cooldown_steps: int = option(
        0,
        "decay the learning rate linearly to zero over the last N of --train-steps (paper: 0, "
        "its formula to the end)",
    )
    # None: `PLANNED_DECAY` for a planned run, else "rsqrt" (`TrainingConfig.resolved_decay`).
    decay: str | None = option(
        None,
        "learning-rate decay after warm-up: rsqrt (paper: inverse square root), rsqrt_cooldown "
        "(rsqrt, then linear to zero over the last 20% of the decay), linear (to zero at the "
        "last step) or cosine (to zero at the last step). Default: rsqrt_cooldown for a run "
        "planned to a time budget, rsqrt otherwise",
        choices=DECAYS,
    )
    seed: int = option(1234, "random seed for weights, shuffling and dropout")
    guided_alignment: str | None = option(
        None,
        "guided alignment (Marian, OpenNMT-tf): a file of word alignments of the training "
        "split, one Moses line per pair (keras-transformer-align-corpus writes it); one "
        "cross-attention head of the last layer learns them (training.guided_alignment). "
        "On-the-fly corpora only (not prepared:DIR or the tf.data service)",
    )
    guided_alignment_weight: float = option(
        1.0, "weight of the guided alignment cross-entropy (OpenNMT-tf's default)"
    )

    def __post_init__(self) -> None:
        check_choice("recipe_name", self.recipe_name, RECIPES)
        check_number("guided_alignment_weight", self.guided_alignment_weight, minimum=0)
        check_number("learning_rate_scale", self.learning_rate_scale, above=0)
        check_int("seed", self.seed, minimum=0, maximum=2**32 - 1)  # NumPy's seed range
        if self.train_steps is not None:
            check_int("train_steps", self.train_steps)
        for name in ("train_minutes", "time_budget_minutes"):
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), minimum=0)
        for name in ("batch_tokens", "accumulate_steps", "warmup_steps"):
            check_int(name, getattr(self, name))
        check_int("cooldown_steps", self.cooldown_steps, minimum=0)
        if self.cooldown_steps > (self.train_steps or DEFAULT_TRAIN_STEPS):
            raise ValueError(
                "cooldown_steps cannot exceed train_steps. Received: "
                f"cooldown_steps={self.cooldown_steps}, train_steps={self.train_steps}"
            )
        if self.decay is not None:
            check_choice("decay", self.decay, DECAYS)


@dataclass(frozen=True)
class EvaluationConfig:
    """The run's evaluations: dev BLEU while training (`eval_every_steps`) and test BLEU at
    the end, whose beam search the export keeps (`TrainingConfig.eval_search`)."""

    eval_beam_size: int = option(
        SearchOptions.beam_size, "beam size of the final test-set evaluation (paper: 4)"
    )
    # None: `eval_alpha_for(model)` (`QUICK_EVAL_ALPHA` for quick, chosen on the dev split).
    eval_alpha: float | None = option(
        None,
        "length penalty alpha of the final evaluation and the export; None: 1.2 for the quick "
        "preset (chosen on the dev split), the paper's 0.6 for the others",
    )
    # None: the whole test split.
    eval_limit: int | None = option(
        None, "evaluate on the first N test pairs only (0: skip evaluation)"
    )
    eval_every_steps: int = option(
        500,
        "decode the dev subset every N steps: dev BLEU/chrF in the log, TensorBoard, "
        "MODEL_DIR/dev_bleu.json and learning_curve.png (0: never)",
    )
    eval_dev_pairs: int = option(200, "size of the dev subset (the dev split's first pairs)")
    eval_decode: str = option(
        "greedy",
        "how to decode the dev subset: greedy (cheap) or beam (--eval-beam-size, --eval-alpha)",
        choices=EVAL_DECODES,
    )
    deliver: str = option(
        "averaged",
        "the weights that test BLEU and the export use: averaged (the last checkpoints "
        "averaged, final.weights.h5) or best (the best dev-BLEU weights, best.weights.h5; "
        "needs --eval-every-steps)",
        choices=DELIVERIES,
    )
    early_stopping: int = option(
        0, "stop after N dev evaluations in a row without a BLEU gain (0: never)"
    )

    def __post_init__(self) -> None:
        if self.eval_alpha is not None:
            check_number("eval_alpha", self.eval_alpha, minimum=0)
        if self.eval_limit is not None:
            check_int("eval_limit", self.eval_limit, minimum=0)
        for name in ("eval_every_steps", "eval_dev_pairs", "early_stopping"):
            check_int(name, getattr(self, name), minimum=0)
        check_choice("eval_decode", self.eval_decode, EVAL_DECODES)
        check_choice("deliver", self.deliver, DELIVERIES)
        if (self.deliver == "best" or self.early_stopping) and not self.eval_every_steps:
            raise ValueError(
                "deliver='best' and early_stopping need dev evaluations. Received: "
                f"eval_every_steps=0, deliver={self.deliver!r}, "
                f"early_stopping={self.early_stopping}"
            )

    def search(self, model: str) -> SearchOptions:
        """The beam search of the evaluations and export of a run of preset `model`."""
        alpha = eval_alpha_for(model, self.eval_alpha)
        return SearchOptions(beam_size=self.eval_beam_size, alpha=alpha)


@dataclass(frozen=True)
class WarmStartConfig:
    """What a run starts from besides random weights (`training.warm_start`): another run's
    weights, architecture and vocabulary (`init_from`; an architecture field left at its
    default takes that run's value, another is refused; the optimizer starts fresh), an
    existing vocabulary (`vocab`), and the parts left untrained (`freeze`)."""

    init_from: str | None = option(
        None,
        "fine-tune RUN_DIR's final weights (or a run's .weights.h5 file) with its spm.model "
        "and architecture: flags left at their defaults take the run's values, a conflicting "
        "--config/--vocab-size/--d-model... is refused. The optimizer starts fresh and warm-up "
        "runs again: fine-tuning usually wants a lower --learning-rate-scale and a small "
        "--warmup-steps. A rerun resumes from MODEL_DIR's own checkpoints",
    )
    vocab: str | None = option(
        None,
        "an existing SentencePiece .model (ids 0 pad, 1 unk, 2 bos, 3 eos, as this tool trains "
        "them) copied to MODEL_DIR/spm.model instead of training one; the vocabulary size is "
        "its own (leave out --vocab-size)",
    )
    freeze: str | None = option(
        None,
        "leave untrained: encoder (its layers) or embeddings (the shared embedding matrix, "
        "which is also the pre-softmax projection: the output layer is frozen too)",
        choices=FREEZE_CHOICES,
    )

    def __post_init__(self) -> None:
        for name in ("init_from", "vocab"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a path or None. Received: {name}={value!r}")
        if self.freeze is not None:
            check_choice("freeze", self.freeze, FREEZE_CHOICES)


@dataclass(frozen=True)
class DistributionConfig:
    """Where and how the steps run: the `tf.distribute` strategy, its devices, the dtype
    policy (`keras_transformer.precision`), XLA and deterministic kernels."""

    strategy: str = option(
        "auto",
        "tf.distribute strategy; auto = MirroredStrategy over all GPUs if several",
        choices=STRATEGIES,
    )
    cpu_replicas: int = option(
        0, "split the CPU into N logical devices (test MirroredStrategy without GPUs)"
    )
    mixed_precision: str = option(
        "auto",
        "compute dtype policy; logits and loss stay float32. auto: by device "
        "(keras_transformer/precision.py): mixed_bfloat16 on GPUs of compute capability 8.0 and up "
        "(A100, H100), mixed_float16 on 7.x (V100, T4), none (float32) on older GPUs; without "
        "GPUs mixed_bfloat16 if the CPU has bfloat16 arithmetic (AVX512_BF16 or AMX), else none",
        choices=MIXED_PRECISION,
    )
    jit_compile: bool = option(
        False, "XLA-compile the train step (one device: refused under mirrored and multi_worker)"
    )
    # On a CPU runs reproduce bit for bit with or without it; on GPUs it makes reruns and
    # resumed runs bit-identical, and can cost speed there.
    deterministic: bool = option(
        False,
        "enable TF op determinism (deterministic GPU kernels); CPU runs are bit-reproducible "
        "without it",
    )

    def __post_init__(self) -> None:
        check_choice("strategy", self.strategy, STRATEGIES)
        check_int("cpu_replicas", self.cpu_replicas, minimum=0)
        check_choice("mixed_precision", self.mixed_precision, MIXED_PRECISION)


@dataclass(frozen=True)
class RunConfig:
    """The run's plumbing: its model directory, checkpoints (kept, averaged into the final
    weights), logs, and how it survives preemption and non-finite batches."""

    # Its layout (config, tokenizer, checkpoints, logs, final weights): `artifacts`.
    model_dir: str = option(
        "runs/sample_en_de", "output directory; an existing run there is resumed"
    )
    # 500: a validation pass over the bundled dev split costs seconds on a 2-core CPU, too
    # many for a ten-minute run at a shorter interval.
    steps_per_epoch: int = option(500, "steps between dev-set evaluations (a Keras epoch)")
    checkpoint_every_steps: int = option(100, "checkpoint interval in steps")
    checkpoint_every_minutes: float = option(
        10.0, "checkpoint interval in minutes (whichever comes first)"
    )
    # 30: the usual cloud notice (`training.preemption`).
    preemption_grace_seconds: float = option(
        30.0,
        "on SIGTERM (a preempted machine) or SIGINT (Ctrl-C): finish the update in flight, "
        "write a checkpoint and exit with status 143 within N seconds (a watchdog exits with "
        "143 if a step outlasts it); rerun the same command to resume",
    )
    keep_checkpoints: int = option(5, "checkpoints kept on disk")
    average_last: int = option(
        5, "average the last K checkpoints into the final weights (paper: 5/20)"
    )
    log_every_steps: int = option(20, "TensorBoard scalar interval (loss, lr, accuracy, tokens/s)")
    skip_nonfinite_batches: int = option(
        0,
        "skip (do not apply, log) up to N batches with a non-finite loss or gradient in the "
        "whole run; 0: stop at the first",
    )

    def __post_init__(self) -> None:
        for name in (
            "steps_per_epoch", "checkpoint_every_steps", "keep_checkpoints", "average_last",
            "log_every_steps",
        ):  # fmt: skip
            check_int(name, getattr(self, name))
        check_int("skip_nonfinite_batches", self.skip_nonfinite_batches, minimum=0)
        check_number("checkpoint_every_minutes", self.checkpoint_every_minutes, above=0)
        check_number("preemption_grace_seconds", self.preemption_grace_seconds, above=0)
        if self.average_last > self.keep_checkpoints:
            raise ValueError(
                "average_last cannot exceed keep_checkpoints. Received: "
                f"average_last={self.average_last}, keep_checkpoints={self.keep_checkpoints}"
            )
