"""Model configuration: every row of Table 3 of "Attention Is All You Need".

`TransformerConfig` is a frozen dataclass with named presets:

    base = TransformerConfig.base(vocab_size=37000)   # ~63M parameters (paper: 65M)
    big = TransformerConfig.big(vocab_size=37000)     # ~214M parameters (paper: 213M)
    tiny = TransformerConfig.tiny(vocab_size=8000)    # trains in minutes on a CPU
    quick = TransformerConfig.quick(vocab_size=4000)  # 2 layers, pre-norm, no dropout: the default

Layers never receive the config object; `build_transformer` unpacks it into plain numbers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from keras_transformer import constants
from keras_transformer.checks import check_choice, check_int, check_number
from keras_transformer.constants import DECAYS, NORM_POSITIONS, POSITIONAL_ENCODINGS

PRESETS = ("quick", "tiny", "base", "big")  # TransformerConfig's named presets


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
            check_int(name, getattr(self, name))
        check_int("max_length", self.max_length)
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
        """The CPU quick-start model (`TrainingConfig`'s default): tiny's widths with 2 layers,
        pre-norm and no dropout. Pre-norm learned faster per step than the paper's post-norm
        at equal steps (benchmarks/results/recipe_study.md: `python benchmarks/run.py recipe
        --variants VARIANTS`); 2 layers step faster than 3 and learned more in the same time
        with the planned run's decay (benchmarks/results/2026-11-25-budget-study-model-rows.md,
        rows l2_cooldown and rsqrt_cooldown: `python benchmarks/run.py recipe budget --steps
        2600 --extra ... --step-cost ...`). An architecture only: the ten-minute run's time
        budget, alpha and dropout by corpus size are the `cpu_quick` recipe's
        (`keras_transformer.recipes`)."""
        values = dict(num_layers=2, d_model=128, d_ff=512, num_heads=4, dropout=0.0)
        values.update(norm_position="pre")
        values.update(overrides)  # norm_position too: --config quick --norm-position post
        return cls(vocab_size=vocab_size, **values)

    @classmethod
    def preset(cls, name: str, vocab_size: int, **overrides: Any) -> TransformerConfig:
        """Build a preset by name (one of `PRESETS`: "quick", "tiny", "base" or "big")."""
        if name not in PRESETS:
            raise ValueError(
                f"Unknown preset. Expected one of {sorted(PRESETS)}. Received: {name!r}"
            )
        return getattr(cls, name)(vocab_size, **overrides)

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


STOP_LOOKAHEADS = ("limit", "next")  # SearchOptions.stop_lookahead


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
        stop_early: stop once no live beam can beat the kept finished hypotheses.
        stop_lookahead: how far ahead `stop_early` looks for a live beam that could still win:
            "limit" (any length up to its limit: never changes the result; tensor2tensor's
            rule) or "next" (only if it ended at the next step: Hugging Face's heuristic, close
            to CTranslate2's top-beam exit; fewer steps, may rarely change a result).
    """

    beam_size: int = 4
    alpha: float = 0.6
    max_extra_length: int = 50
    n_best: int = 1
    padded_decode: bool = False
    stop_early: bool = True
    stop_lookahead: str = "limit"

    def __post_init__(self) -> None:
        check_int("beam_size", self.beam_size)
        check_choice("stop_lookahead", self.stop_lookahead, STOP_LOOKAHEADS)
        check_int("n_best", self.n_best)
        if self.n_best > self.beam_size:
            raise ValueError(
                "n_best cannot exceed beam_size. "
                f"Received: n_best={self.n_best}, beam_size={self.beam_size}"
            )
        check_number("alpha", self.alpha)
        check_int("max_extra_length", self.max_extra_length, minimum=0)

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
            of the model's `max_length`: the best dev BLEU of the quick preset on sentences
            and close to the best on documents stripped of punctuation
            (benchmarks/results/2026-11-25-benchmarks-history.md, "Whole inputs: documents
            against sentences, and where to cut a long sentence": `python pipelines/evaluate.py
            --split dev --segment --max-segment-pieces L`).
        max_input_bytes: longer inputs are refused (InvalidArgumentError, INVALID_ARGUMENT
            over TF Serving) with a message that names the limit. A policy, not a measured
            optimum: memory is bounded by `batch_size` and time grows with the input, so the
            limit (about 15,000 words) bounds how long one request holds a server.
        batch_size: segments per beam search; the segments of a batch of inputs are sorted
            by length and searched in batches of this size, the fastest size measured on a
            2-core CPU (benchmarks/results/2026-11-25-benchmarks-history.md, "Whole inputs:
            documents against sentences, and where to cut a long sentence": `python
            benchmarks/serving_benchmark.py --export-dir EXPORT --documents N`).
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
            check_int("max_segment_pieces", self.max_segment_pieces)
        check_int("max_input_bytes", self.max_input_bytes)
        check_int("batch_size", self.batch_size)

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


ALIGNMENT_ROWS = ("predict", "input")  # the attention row read for an output piece


@dataclass(frozen=True)
class AlignmentOptions:
    """Which cross-attention gives the word alignments (`decoding.alignments`): `layer`'s
    `head` (None: the mean over heads), read at the `row` that predicts each output piece
    ("predict") or that takes it as the decoder's input ("input").

    The default is the lowest alignment error rate of an unguided model on the hand-aligned
    gold set (26 dev pairs, 223 links, benchmarks/data/alignment_gold.tsv): the last layer's
    mean, AER 0.37. A run trained with `--guided-alignment` aligns with the head it trained
    (`guided()`): AER 0.23 against its own mean's 0.36
    (benchmarks/results/2026-11-26-issue-53-guided-alignment.md).
    """

    layer: int = -1
    head: int | None = None
    row: str = "predict"

    def __post_init__(self) -> None:
        check_choice("row", self.row, ALIGNMENT_ROWS)
        if not isinstance(self.layer, int) or not (self.head is None or isinstance(self.head, int)):
            raise ValueError(
                f"layer must be an int and head an int or None. Received: layer={self.layer!r}, "
                f"head={self.head!r}"
            )

    @classmethod
    def guided(cls) -> AlignmentOptions:
        """The head that `--guided-alignment` trains (`training.guided_alignment`): head 0 of
        the last decoder layer, at the row that predicts each piece (OpenNMT-tf's choice)."""
        return cls(layer=-1, head=0, row="predict")

    def kwargs(self) -> dict[str, Any]:
        """`layer`, `head` and `row` as keyword arguments of `alignments.align_ids`."""
        return dataclasses.asdict(self)


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
            check_number("eval_alpha", self.eval_alpha)
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
