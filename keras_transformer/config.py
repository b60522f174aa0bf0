"""Model configuration: every row of Table 3 of "Attention Is All You Need".

`TransformerConfig` is a frozen dataclass with named presets:

    base = TransformerConfig.base(vocab_size=37000)   # ~63M parameters (paper: 65M)
    big = TransformerConfig.big(vocab_size=37000)     # ~214M parameters (paper: 213M)
    tiny = TransformerConfig.tiny(vocab_size=8000)    # trains in minutes on a CPU
    quick = TransformerConfig.quick(vocab_size=4000)  # tiny, pre-norm, no dropout: the default

Layers never receive the config object; `build_transformer` unpacks it into plain numbers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from keras_transformer import constants
from keras_transformer.checks import check_choice, check_number
from keras_transformer.constants import DECAYS, NORM_POSITIONS, POSITIONAL_ENCODINGS


@dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of the encoder-decoder Transformer (paper, Table 3).

    Args:
        vocab_size: size of the shared source/target subword vocabulary.
        num_layers: N, the number of identical layers in the encoder and in the decoder.
        d_model: width of every sub-layer output and of the embeddings.
        d_ff: inner width of the position-wise feed-forward network.
        num_heads: h, the number of attention heads.
        d_k: width of queries and keys per head (default d_model // num_heads).
        d_v: width of values per head (default d_model // num_heads).
        dropout: P_drop, applied to every sub-layer output and to embedding + PE sums.
        attention_dropout: dropout on attention weights (the paper uses none).
        label_smoothing: epsilon_ls of the training loss.
        positional_encoding: "sinusoidal" (paper) or "learned" (Table 3, row E).
        norm_position: "post" (paper: LayerNorm(x + Sublayer(x))) or "pre".
        share_embeddings: one matrix for source embedding, target embedding and the
            pre-softmax projection (paper, section 3.4). If False, the source gets its own
            embedding and the target embedding stays tied to the output projection.
        layer_norm_epsilon: epsilon of every LayerNormalization.
        max_length: longest sequence (in subword tokens) the model accepts.

    The special ids (`pad_id`, `unk_id`, `bos_id`, `eos_id`) are read-only properties: they
    belong to the vocabulary and are written once, in `keras_transformer.constants`.
    """

    vocab_size: int
    num_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    num_heads: int = 8
    d_k: int | None = None
    d_v: int | None = None
    dropout: float = 0.1
    attention_dropout: float = 0.0
    label_smoothing: float = 0.1
    positional_encoding: str = "sinusoidal"
    norm_position: str = "post"
    share_embeddings: bool = True
    layer_norm_epsilon: float = 1e-6
    max_length: int = 256

    pad_id = property(lambda self: constants.PAD_ID)
    unk_id = property(lambda self: constants.UNK_ID)
    bos_id = property(lambda self: constants.BOS_ID)
    eos_id = property(lambda self: constants.EOS_ID)

    def __post_init__(self) -> None:
        if self.d_k is None:
            object.__setattr__(self, "d_k", self.d_model // max(self.num_heads, 1))
        if self.d_v is None:
            object.__setattr__(self, "d_v", self.d_model // max(self.num_heads, 1))
        self._validate()

    def _validate(self) -> None:
        for name in ("vocab_size", "num_layers", "d_model", "d_ff", "num_heads", "d_k", "d_v"):
            _check_positive_int(name, getattr(self, name))
        _check_positive_int("max_length", self.max_length)
        if self.d_model % self.num_heads:
            raise ValueError(
                "d_model must be divisible by num_heads. "
                f"Received: d_model={self.d_model}, num_heads={self.num_heads}"
            )
        for name in ("dropout", "attention_dropout", "label_smoothing"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1). Received: {name}={value}")
        check_choice("positional_encoding", self.positional_encoding, POSITIONAL_ENCODINGS)
        check_choice("norm_position", self.norm_position, NORM_POSITIONS)
        if self.vocab_size <= self.eos_id:
            raise ValueError(
                f"vocab_size must exceed the special ids 0..{self.eos_id}. "
                f"Received: vocab_size={self.vocab_size}"
            )

    # Presets -------------------------------------------------------------------------------

    @classmethod
    def base(cls, vocab_size: int, **overrides: Any) -> TransformerConfig:
        """Transformer (base model), Table 3 first row: about 65M parameters."""
        return cls(vocab_size=vocab_size, **overrides)

    @classmethod
    def big(cls, vocab_size: int, **overrides: Any) -> TransformerConfig:
        """Transformer (big): about 213M parameters; use dropout=0.1 for En-Fr."""
        values = dict(num_layers=6, d_model=1024, d_ff=4096, num_heads=16, dropout=0.3)
        values.update(overrides)
        return cls(vocab_size=vocab_size, **values)

    @classmethod
    def tiny(cls, vocab_size: int, **overrides: Any) -> TransformerConfig:
        """A small model for CPUs and tests: 3 layers, d_model 128, 4 heads."""
        values = dict(num_layers=3, d_model=128, d_ff=512, num_heads=4, dropout=0.1)
        values.update(overrides)
        return cls(vocab_size=vocab_size, **values)

    @classmethod
    def quick(cls, vocab_size: int, **overrides: Any) -> TransformerConfig:
        """The CPU quick-start model (`TrainingConfig`'s default): tiny's sizes with pre-norm
        and no dropout, which learn about twice as fast per step in a ten-minute run
        (benchmarks/results/recipe_study.md)."""
        values = dict(num_layers=3, d_model=128, d_ff=512, num_heads=4, dropout=0.0)
        values.update(norm_position="pre")
        values.update(overrides)  # norm_position too: --config quick --norm-position post
        return cls(vocab_size=vocab_size, **values)

    @classmethod
    def preset(cls, name: str, vocab_size: int, **overrides: Any) -> TransformerConfig:
        """Build a preset by name ("quick", "tiny", "base" or "big")."""
        presets = {"quick": cls.quick, "tiny": cls.tiny, "base": cls.base, "big": cls.big}
        if name not in presets:
            raise ValueError(
                f"Unknown preset. Expected one of {sorted(presets)}. Received: {name!r}"
            )
        return presets[name](vocab_size, **overrides)

    def replace(self, **changes: Any) -> TransformerConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TransformerConfig:
        values = dict(values)
        for name in ("pad_id", "unk_id", "bos_id", "eos_id"):  # written by earlier versions
            if name in values and values.pop(name) != getattr(constants, name.upper()):
                raise ValueError(
                    f"{name} differs from this vocabulary layout's {name}="
                    f"{getattr(constants, name.upper())}: the model cannot be used"
                )
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown TransformerConfig fields: {unknown}")
        return cls(**values)


# The quick preset's length penalty: its ten-minute models end hypotheses early (brevity
# penalty 0.89 on the dev split at the paper's 0.6). On the dev split, the default run's
# alpha 0.6 / 1.0 / 1.2 / 1.4 gave BLEU 21.17 / 21.58 / 22.11 / 19.18, and two other quick
# runs peaked at 1.2 too (benchmarks/README.md, "The quick preset's length penalty, and two
# recipe changes at the full budget"); above 1.2 hypotheses run 12-17% long.
QUICK_EVAL_ALPHA = 1.2


def eval_alpha_for(model: str, eval_alpha: float | None = None) -> float:
    """The length penalty alpha a run of preset `model` evaluates and exports with:
    `eval_alpha` if given, else `QUICK_EVAL_ALPHA` for "quick" and the paper's 0.6 for every
    other preset."""
    if eval_alpha is not None:
        return eval_alpha
    return QUICK_EVAL_ALPHA if model == "quick" else SearchOptions.alpha


# The quick preset's wall-clock limit on training (`model.fit`, evaluations included): the
# default command must train in at most ten minutes on a 2-core CPU whatever its speed. At
# 9.5 minutes, the few seconds after the stop (last dev evaluation, validation pass,
# checkpoint) stay inside ten. On the AMX Xeon the default run's 2000 steps fit inside it; a
# slower CPU stops earlier, with fewer steps (benchmarks/README.md, "A ten-minute limit").
QUICK_TRAIN_MINUTES = 9.5


# The quick preset's time budget for the whole run, from the process's start to the exported
# model (tokenizer, training, evaluations, test BLEU, export): a run without `train_steps`
# plans its steps to it (`training.budget`), so the README's first command takes at most ten
# minutes plus the install on any CPU.
QUICK_BUDGET_MINUTES = 10.0
DEFAULT_TRAIN_STEPS = 2000  # a run with neither train_steps nor a budget
# The decay of a run planned to a budget (`training.schedule`): chosen by the budget study
# (benchmarks/results/budget_study.md).
PLANNED_DECAY = "linear"
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


def _check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int. Received: {name}={value!r}")


@dataclass(frozen=True)
class SearchOptions:
    """How to decode: the paper's inference settings (section 6.1) are the defaults, written
    here once and used by the translator, evaluation, attention plots, export, training's
    final evaluation and every command-line flag. One exception, measured: runs of the quick
    preset evaluate and export with alpha `QUICK_EVAL_ALPHA` (`eval_alpha_for`), and the
    commands' `--alpha` defaults to the alpha of the run they load.

    Args:
        beam_size: hypotheses kept per source (paper: 4).
        alpha: GNMT length penalty exponent (paper: 0.6).
        max_extra_length: a source of n tokens gets at most n + max_extra_length output
            tokens (paper: 50).
        n_best: hypotheses returned per source, best first (at most beam_size).
        padded_decode: fixed-size decoding buffers (static shapes, for XLA).
        stop_early: stop once no live beam can beat the kept finished hypotheses (never
            changes the result).
    """

    beam_size: int = 4
    alpha: float = 0.6
    max_extra_length: int = 50
    n_best: int = 1
    padded_decode: bool = False
    stop_early: bool = True

    def __post_init__(self) -> None:
        _check_positive_int("beam_size", self.beam_size)
        _check_positive_int("n_best", self.n_best)
        if self.n_best > self.beam_size:
            raise ValueError(
                "n_best cannot exceed beam_size. "
                f"Received: n_best={self.n_best}, beam_size={self.beam_size}"
            )
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)):
            raise ValueError(f"alpha must be a number. Received: alpha={self.alpha!r}")
        if not isinstance(self.max_extra_length, int) or self.max_extra_length < 0:
            raise ValueError(
                "max_extra_length must be an int >= 0. "
                f"Received: max_extra_length={self.max_extra_length!r}"
            )

    def replace(self, **changes: Any) -> SearchOptions:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


OVERLONG = ("split", "truncate")  # what happens to a segment longer than the model takes


@dataclass(frozen=True)
class DocumentOptions:
    """How a whole input (a paragraph, a page, a document) is translated: every entry point
    (`Translator`, the export's signatures, `translate.py`, `evaluate.py --segment`) splits it
    into sentences, translates all sentences of a batch together and joins each input's
    translations back with its own whitespace (`keras_transformer.data.segmenter`).

    Args:
        segment: split inputs into sentences; False sends each input whole (a line of a
            sentence-per-line file is then one segment).
        overlong: a segment longer than `max_segment_pieces` subword pieces is "split" further
            at piece boundaries near the limit (after a comma or semicolon where there is one,
            else between words) and every part is translated; "truncate" keeps only its first
            `max_length - 1` pieces (the behaviour before documents; eager calls warn).
        max_segment_pieces: the longest segment sent to the model, in pieces; None: a quarter
            of the model's `max_length` (32 for the quick preset's 128). Measured on the quick
            preset's dev split (benchmarks/README.md, "Whole inputs"): limits 16 / 24 / 32 /
            48 / 64 / none gave BLEU 21.9 / 23.5 / 23.9 / 23.6 / 23.5 / 23.5 on its sentences
            and 15.2 / 14.5 / 14.2 / 12.6 / 11.4 / 9.8 on documents stripped of punctuation.
        max_input_bytes: longer inputs are refused (InvalidArgumentError, INVALID_ARGUMENT
            over TF Serving) with a message that names the limit. A policy, not a measured
            optimum: 50,000 bytes took 4.3 s and 1.7 GB of peak memory with the quick model
            on a 2-core CPU (memory is bounded by `batch_size`, time grows with the input), so
            100,000 bytes (about 15,000 words) hold a server for about 9 s at most.
        batch_size: segments per beam search; the segments of a batch of inputs are sorted
            by length and searched in batches of this size. 128 measured fastest on a 2-core
            CPU (benchmarks/README.md, "Whole inputs"): with 8 / 32 documents a call,
            16, 32, 64, 128 gave 61 / -, 69 / 79, 72 / 89, 79 / 96 sentences/s, and 256
            gave 90 with 32 documents a call.
    """

    segment: bool = True
    overlong: str = "split"
    max_segment_pieces: int | None = None
    max_input_bytes: int = 100_000
    batch_size: int = 128

    def __post_init__(self) -> None:
        if not isinstance(self.segment, bool):
            raise ValueError(f"segment must be a bool. Received: segment={self.segment!r}")
        check_choice("overlong", self.overlong, OVERLONG)
        if self.max_segment_pieces is not None:
            _check_positive_int("max_segment_pieces", self.max_segment_pieces)
        _check_positive_int("max_input_bytes", self.max_input_bytes)
        _check_positive_int("batch_size", self.batch_size)

    @classmethod
    def sentences(cls, **overrides: Any) -> DocumentOptions:
        """Each input is one sentence, cut at the model's `max_length` (the behaviour before
        documents): sentence-level evaluation, whose figures stay comparable."""
        return cls(**{"segment": False, "overlong": "truncate", **overrides})

    def segment_limit(self, max_length: int) -> int:
        """The longest segment in pieces for a model of `max_length` (EOS not counted)."""
        limit = self.max_segment_pieces or max_length // 4
        return max(1, min(limit, max_length - 1))

    def replace(self, **changes: Any) -> DocumentOptions:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


STRATEGIES = ("auto", "mirrored", "one_device", "multi_worker")
MIXED_PRECISION = ("auto", "none", "mixed_bfloat16", "mixed_float16")
EVAL_DECODES = ("greedy", "beam")  # how training decodes its dev subset
FREEZE_CHOICES = ("encoder", "embeddings")  # parts of the model a run may leave untrained


@dataclass(frozen=True)
class TrainingConfig:
    """The training recipe (paper, section 5) and the run's plumbing.

    Defaults train the `quick` model on the bundled En-De corpus in about ten minutes on a
    2-core CPU. They come from a measured comparison (benchmarks/results/recipe_study.md, equal
    steps, dev loss/accuracy and test BLEU): pre-norm with no dropout at the paper's learning
    rate (scale 1, warm-up 400) learns about twice as fast per step as post-norm, whose best
    rate (scale 0.5, no dropout) sits next to a divergence at scale 2, while pre-norm still
    trains at twice its rate; dropout 0.1 slows a run of a few epochs (tiny, 1800 steps: test
    BLEU 0.75 with it at scale 1, 13.4 without it at scale 0.5). Label smoothing 0.1,
    1536-token batches (many small updates), vocabulary 4000, max_length 128 and averaging the
    last 5 checkpoints (100 steps apart) stay as they were. The paper's base recipe:
    `model="base", batch_tokens=25000` (global, over 8 GPUs), `warmup_steps=4000,
    train_steps=100_000, average_last=5`.

    Args:
        model: preset name of the `TransformerConfig` ("quick", "tiny", "base", "big").
        dataset: "sample_en_de", "sample_en_fr", "wmt14_en_de", "wmt14_en_fr", "tsv:PATH",
            "text:SRC,TGT" (two aligned files), or a weighted mix of these for training,
            "SPEC@WEIGHT+SPEC@WEIGHT..." (`keras_transformer.data.corpus`).
        dev_dataset, test_dataset: a "tsv:PATH" or "text:SRC,TGT" read whole as the dev or
            test split (None: the dataset's own split, or its carve-off; a mix's first
            corpus's).
        reverse: swap source and target of every split (German -> English from En-De).
        model_dir: where config, tokenizer, checkpoints, logs and final weights go.
        train_steps: optimizer updates in all (a resumed run continues up to this). None:
            planned to `time_budget_minutes` when there is a budget (`training.budget`),
            else `DEFAULT_TRAIN_STEPS` (2000).
        train_minutes: stop training (`model.fit`, evaluations included) before a step that
            would end past this many minutes of wall clock, even before `train_steps`; the
            run then finishes as usual (checkpoint, averaging, test BLEU, export). It counts
            this process's time: a resumed run gets the limit again. None:
            `train_minutes_for(model)`, `QUICK_TRAIN_MINUTES` (9.5) for the quick preset, no
            limit for the others; 0: no limit. Under the multi_worker strategy each worker
            counts its own time and the first to reach the limit stops all of them after the
            same update.
        time_budget_minutes: the whole run's budget (from the process's start to the
            export) that a run without `train_steps` plans its steps to: after warm-up it
            measures the step time, records the plan in `MODEL_DIR/plan.json` and decays the
            learning rate to zero at the planned last step (`decay`); a resumed run follows
            the recorded plan. None: `budget_minutes_for(model)`, `QUICK_BUDGET_MINUTES` (10)
            for the quick preset, none for the others; 0: none. Ignored with `train_steps`.
        vocab_size: pieces of the shared SentencePiece BPE vocabulary.
        batch_tokens: padded source (and target) tokens per replica batch.
        accumulate_steps: micro-batches whose gradients are averaged into one optimizer update
            (gradient accumulation: the paper's 25000-token batches on one or two GPUs). Steps,
            the learning-rate schedule and every interval count updates; an update sees
            `accumulate_steps` x replicas x `batch_tokens` tokens.
        max_length: longest sentence in pieces kept for training (and the model's limit).
        warmup_steps: of the learning-rate schedule.
        learning_rate_scale: constant factor on the paper's schedule.
        cooldown_steps: decay the rate linearly to zero over the last `cooldown_steps` of
            `train_steps` (0: the paper's schedule to the end).
        decay: the learning rate's decay after warm-up (`training.schedule`): "rsqrt" (the
            paper's inverse square root), "rsqrt_cooldown", "linear" or "cosine" (the last
            three end at the run's last step). None: `PLANNED_DECAY` for a run planned to a
            budget, the paper's "rsqrt" otherwise.
        label_smoothing: eps_ls.
        dropout: overrides the preset's P_drop if set.
        num_layers, d_model, d_ff, num_heads, norm_position: override the preset's if set.
        strategy: "auto" (MirroredStrategy over all GPUs, else default), "mirrored",
            "one_device", "multi_worker" (TF_CONFIG).
        cpu_replicas: split the CPU into this many logical devices (to test MirroredStrategy).
        mixed_precision: "auto", "none", "mixed_bfloat16" or "mixed_float16". "auto":
            "mixed_bfloat16" on a machine without GPUs whose CPU has bfloat16 arithmetic
            (AVX512_BF16 or AMX: the default command 1.27x faster at the same test BLEU on a
            2-core AMX Xeon), "none" elsewhere (`training.precision`).
        jit_compile: XLA-compile the train step.
        steps_per_epoch: steps between validation passes and Keras epoch logs (500, with the
            dev BLEU of `eval_every_steps`: a validation pass over the bundled 609 dev pairs
            costs about 6 s on a 2-core CPU, 2 of the default run's 15 minutes at 100).
        checkpoint_every_steps / checkpoint_every_minutes: checkpoint when either is reached.
        preemption_grace_seconds: on SIGTERM or SIGINT the run finishes its update, writes a
            checkpoint and exits (status 143) within this many seconds, else a watchdog ends
            it with the same status (`training.preemption`); 30: the usual cloud notice.
        keep_checkpoints: checkpoints kept on disk.
        average_last: checkpoints averaged into the final weights (paper: 5 base, 20 big).
        log_every_steps: TensorBoard scalars interval.
        seed: for weights, shuffling and dropout.
        eval_beam_size, eval_alpha, eval_limit: BLEU evaluation on the test split at the end
            (eval_limit=0: no evaluation; None: the whole split). The export translates with
            the same beam and alpha. eval_alpha None: `eval_alpha_for(model)`, 1.2 for the
            quick preset (chosen on the dev split: +0.9 BLEU over the paper's 0.6), the
            paper's 0.6 for the others.
        eval_every_steps: decode a fixed dev subset every N steps and log dev BLEU/chrF,
            `MODEL_DIR/dev_bleu.json` and `learning_curve.png` (0: never).
        eval_dev_pairs: size of that subset (the dev split's first pairs).
        eval_decode: "greedy" (cheap) or "beam" (eval_beam_size, eval_alpha) for it.
        keep_best: keep the weights of the best dev BLEU (`best.weights.h5`) and evaluate and
            export those instead of the averaged final weights.
        early_stopping: stop after N dev evaluations without a BLEU gain (0: never).
        data_dir: TFDS data directory for WMT.
        skip_nonfinite_batches: batches with a non-finite loss or gradient that may be skipped
            (not applied, logged) in the whole run before it stops with an error; 0: stop at
            the first.
        deterministic: `tf.config.experimental.enable_op_determinism()` (deterministic
            kernels, an error for ops without one). CPU runs here reproduce bit for bit with
            or without it, at the same speed (tiny model, 2 cores: 1.28 s/step with it, 1.35
            s/step without, within the noise); on GPUs it is what makes reruns and resumed
            runs bit-identical, and it can cost speed there.
        init_from: fine-tune: a run directory (its `final.weights.h5`) or a `.weights.h5`
            file of a run; the run's spm.model and architecture are reused (an architecture
            field left at its default takes the run's value, another is refused) and its
            weights loaded before the first step of a run without checkpoints of its own. The
            optimizer starts fresh (warm-up again). See `training.warm_start`.
        vocab: an existing SentencePiece `.model` (this project's special ids) copied into
            model_dir instead of training one; vocab_size is its piece count.
        freeze: leave "encoder" (its layers) or "embeddings" (the shared embedding matrix, so
            also the pre-softmax projection) untrained; None trains everything.
    """

    model: str = "quick"
    dataset: str = "sample_en_de"
    dev_dataset: str | None = None
    test_dataset: str | None = None
    reverse: bool = False
    model_dir: str = "runs/sample_en_de"
    train_steps: int | None = None
    train_minutes: float | None = None
    time_budget_minutes: float | None = None
    vocab_size: int = 4000
    batch_tokens: int = 1536
    accumulate_steps: int = 1
    max_length: int = 128
    warmup_steps: int = 400
    learning_rate_scale: float = 1.0
    cooldown_steps: int = 0
    decay: str | None = None
    label_smoothing: float = 0.1
    dropout: float | None = None
    num_layers: int | None = None
    d_model: int | None = None
    d_ff: int | None = None
    num_heads: int | None = None
    norm_position: str | None = None
    strategy: str = "auto"
    cpu_replicas: int = 0
    mixed_precision: str = "auto"
    jit_compile: bool = False
    steps_per_epoch: int = 500
    checkpoint_every_steps: int = 100
    checkpoint_every_minutes: float = 10.0
    preemption_grace_seconds: float = 30.0
    keep_checkpoints: int = 5
    average_last: int = 5
    log_every_steps: int = 20
    seed: int = 1234
    eval_beam_size: int = SearchOptions.beam_size
    eval_alpha: float | None = None
    eval_limit: int | None = None
    eval_every_steps: int = 500
    eval_dev_pairs: int = 200
    eval_decode: str = "greedy"
    keep_best: bool = False
    early_stopping: int = 0
    data_dir: str | None = None
    skip_nonfinite_batches: int = 0
    deterministic: bool = False
    init_from: str | None = None
    vocab: str | None = None
    freeze: str | None = None

    def __post_init__(self) -> None:
        if self.train_steps is not None:
            _check_positive_int("train_steps", self.train_steps)
        for name in (
            "vocab_size",
            "batch_tokens",
            "accumulate_steps",
            "max_length",
            "warmup_steps",
            "steps_per_epoch",
            "checkpoint_every_steps",
            "keep_checkpoints",
            "average_last",
            "log_every_steps",
        ):
            _check_positive_int(name, getattr(self, name))
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"strategy must be one of {STRATEGIES}. Received: strategy={self.strategy!r}"
            )
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(
                f"mixed_precision must be one of {MIXED_PRECISION}. "
                f"Received: mixed_precision={self.mixed_precision!r}"
            )
        if self.average_last > self.keep_checkpoints:
            raise ValueError(
                "average_last cannot exceed keep_checkpoints. Received: "
                f"average_last={self.average_last}, keep_checkpoints={self.keep_checkpoints}"
            )
        if self.batch_tokens < self.max_length:
            raise ValueError(
                "batch_tokens must be >= max_length. Received: "
                f"batch_tokens={self.batch_tokens}, max_length={self.max_length}"
            )
        for name in (
            "skip_nonfinite_batches",
            "cooldown_steps",
            "eval_every_steps",
            "eval_dev_pairs",
            "early_stopping",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0. Received: {name}={value!r}")
        if self.cooldown_steps > (self.train_steps or DEFAULT_TRAIN_STEPS):
            raise ValueError(
                "cooldown_steps cannot exceed train_steps. Received: "
                f"cooldown_steps={self.cooldown_steps}, train_steps={self.train_steps}"
            )
        if self.accumulate_steps > 1 and self.mixed_precision == "mixed_float16":
            raise ValueError(
                "accumulate_steps > 1 is not supported with mixed_float16 (its loss-scale "
                "optimizer); use mixed_bfloat16. Received: "
                f"accumulate_steps={self.accumulate_steps}, mixed_precision='mixed_float16'"
            )
        if self.eval_alpha is not None and (
            isinstance(self.eval_alpha, bool) or not isinstance(self.eval_alpha, (int, float))
        ):
            raise ValueError(
                f"eval_alpha must be a number or None. Received: eval_alpha={self.eval_alpha!r}"
            )
        self._check_train_minutes()
        if self.decay is not None:
            check_choice("decay", self.decay, DECAYS)
        if self.time_budget_minutes is not None:
            check_number("time_budget_minutes", self.time_budget_minutes, minimum=0)
        if self.planned() and self.strategy == "multi_worker":
            raise ValueError(
                "A run planned to a time budget needs one process: give --train-steps under "
                "multi_worker. Received: strategy='multi_worker', train_steps=None, "
                f"time_budget_minutes={self.time_budget_minutes!r}"
            )
        if self.eval_decode not in EVAL_DECODES:
            raise ValueError(
                f"eval_decode must be one of {EVAL_DECODES}. "
                f"Received: eval_decode={self.eval_decode!r}"
            )
        if (self.keep_best or self.early_stopping) and not self.eval_every_steps:
            raise ValueError(
                "keep_best and early_stopping need dev evaluations. Received: "
                f"eval_every_steps=0, keep_best={self.keep_best}, "
                f"early_stopping={self.early_stopping}"
            )
        if self.cpu_replicas < 0 or self.checkpoint_every_minutes <= 0:
            raise ValueError(
                "cpu_replicas must be >= 0 and checkpoint_every_minutes > 0. Received: "
                f"cpu_replicas={self.cpu_replicas}, "
                f"checkpoint_every_minutes={self.checkpoint_every_minutes}"
            )
        grace = self.preemption_grace_seconds
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not grace > 0:
            raise ValueError(
                "preemption_grace_seconds must be a number > 0. Received: "
                f"preemption_grace_seconds={grace!r}"
            )
        for name in ("init_from", "vocab"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a path or None. Received: {name}={value!r}")
        if self.freeze is not None:
            check_choice("freeze", self.freeze, FREEZE_CHOICES)

    def _check_train_minutes(self) -> None:
        value = self.train_minutes
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(
                f"train_minutes must be a number >= 0 or None. Received: train_minutes={value!r}"
            )

    def budget_seconds(self) -> float | None:
        """The budget the run plans its steps to (seconds), or None: a run with
        `train_steps`, without a budget, or under multi_worker without an explicit one."""
        if self.train_steps is not None:
            return None
        if self.strategy == "multi_worker" and self.time_budget_minutes is None:
            return None  # one process measures and plans: the workers could not agree
        minutes = budget_minutes_for(self.model, self.time_budget_minutes)
        return minutes * 60.0 if minutes > 0 else None

    def planned(self) -> bool:
        """Whether the run plans its steps to a time budget."""
        return self.budget_seconds() is not None

    def step_limit(self) -> int:
        """The most updates the run may make: `train_steps`, a planned run's bound before
        its plan (budget / `MIN_STEP_SECONDS`), else `DEFAULT_TRAIN_STEPS`."""
        if self.train_steps is not None:
            return self.train_steps
        budget = self.budget_seconds()
        return int(budget / MIN_STEP_SECONDS) if budget else DEFAULT_TRAIN_STEPS

    def resolved_decay(self) -> str:
        """`decay`, or its default: `PLANNED_DECAY` when planned, the paper's "rsqrt"."""
        if self.decay is not None:
            return self.decay
        return PLANNED_DECAY if self.planned() else "rsqrt"

    def time_limit_seconds(self) -> float | None:
        """The run's limit on training time in seconds (`train_minutes`, resolved by
        `train_minutes_for`), or None without one."""
        minutes = train_minutes_for(self.model, self.train_minutes)
        return minutes * 60.0 if minutes > 0 else None

    def eval_search(self) -> SearchOptions:
        """The beam search of the run's evaluations and export (`eval_beam_size`,
        `eval_alpha`; None: `eval_alpha_for(model)`)."""
        alpha = eval_alpha_for(self.model, self.eval_alpha)
        return SearchOptions(beam_size=self.eval_beam_size, alpha=alpha)

    def split_dataset(self, split: str) -> tuple[str, str]:
        """`(dataset, split of it)` that the run reads as its "train", "dev" or "test" split:
        an explicit `dev_dataset`/`test_dataset` is read whole ("all"), else `dataset`'s own
        split (read both with `keras_transformer.data.corpus.read_split`)."""
        explicit = {"train": None, "dev": self.dev_dataset, "test": self.test_dataset}
        if split not in explicit:
            raise ValueError(f"split must be train, dev or test. Received: split={split!r}")
        return (self.dataset, split) if explicit[split] is None else (explicit[split], "all")

    def model_config(self, vocab_size: int | None = None) -> TransformerConfig:
        """The `TransformerConfig` of this run (the tokenizer's real vocab size wins)."""
        overrides: dict[str, Any] = {
            "max_length": self.max_length,
            "label_smoothing": self.label_smoothing,
        }
        for name in ("dropout", "num_layers", "d_model", "d_ff", "num_heads", "norm_position"):
            if getattr(self, name) is not None:
                overrides[name] = getattr(self, name)
        return TransformerConfig.preset(self.model, vocab_size or self.vocab_size, **overrides)
