"""Model configuration: every row of Table 3 of "Attention Is All You Need".

`TransformerConfig` is a frozen dataclass with named presets:

    base = TransformerConfig.base(vocab_size=37000)   # ~63M parameters (paper: 65M)
    big = TransformerConfig.big(vocab_size=37000)     # ~214M parameters (paper: 213M)
    tiny = TransformerConfig.tiny(vocab_size=8000)    # trains in minutes on a CPU

Layers never receive the config object; `build_transformer` unpacks it into plain numbers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")
NORM_POSITIONS = ("post", "pre")


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
        pad_id, unk_id, bos_id, eos_id: special token ids of the vocabulary.
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
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3

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
        if self.positional_encoding not in POSITIONAL_ENCODINGS:
            raise ValueError(
                f"positional_encoding must be one of {POSITIONAL_ENCODINGS}. "
                f"Received: positional_encoding={self.positional_encoding!r}"
            )
        if self.norm_position not in NORM_POSITIONS:
            raise ValueError(
                f"norm_position must be one of {NORM_POSITIONS}. "
                f"Received: norm_position={self.norm_position!r}"
            )
        self._validate_special_ids()

    def _validate_special_ids(self) -> None:
        ids = {"pad_id": self.pad_id, "unk_id": self.unk_id, "bos_id": self.bos_id}
        ids["eos_id"] = self.eos_id
        for name, value in ids.items():
            if not isinstance(value, int) or not 0 <= value < self.vocab_size:
                raise ValueError(
                    f"{name} must be an int in [0, vocab_size={self.vocab_size}). "
                    f"Received: {name}={value!r}"
                )
        if len(set(ids.values())) != len(ids):
            raise ValueError(f"Special token ids must be distinct. Received: {ids}")

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
    def preset(cls, name: str, vocab_size: int, **overrides: Any) -> TransformerConfig:
        """Build a preset by name ("tiny", "base" or "big")."""
        presets = {"tiny": cls.tiny, "base": cls.base, "big": cls.big}
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
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown TransformerConfig fields: {unknown}")
        return cls(**values)


def _check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int. Received: {name}={value!r}")


STRATEGIES = ("auto", "mirrored", "one_device", "multi_worker")
MIXED_PRECISION = ("none", "mixed_bfloat16", "mixed_float16")


@dataclass(frozen=True)
class TrainingConfig:
    """The training recipe (paper, section 5) and the run's plumbing.

    Defaults train the tiny model on the bundled En-De corpus in about ten minutes on a 2-core
    CPU. The paper's base recipe: `model="base", batch_tokens=25000` (global, over 8 GPUs),
    `warmup_steps=4000, train_steps=100_000, average_last=5`.

    Args:
        model: preset name of the `TransformerConfig` ("tiny", "base", "big").
        dataset: "sample_en_de", "sample_en_fr", "wmt14_en_de", "wmt14_en_fr" or "tsv:PATH".
        model_dir: where config, tokenizer, checkpoints, logs and final weights go.
        train_steps: optimizer updates in all (a resumed run continues up to this).
        vocab_size: pieces of the shared SentencePiece BPE vocabulary.
        batch_tokens: padded source (and target) tokens per replica batch.
        max_length: longest sentence in pieces kept for training (and the model's limit).
        warmup_steps: of the learning-rate schedule.
        learning_rate_scale: constant factor on the paper's schedule.
        label_smoothing: eps_ls.
        dropout: overrides the preset's P_drop if set.
        num_layers, d_model, d_ff, num_heads, norm_position: override the preset's if set.
        strategy: "auto" (MirroredStrategy over all GPUs, else default), "mirrored",
            "one_device", "multi_worker" (TF_CONFIG).
        cpu_replicas: split the CPU into this many logical devices (to test MirroredStrategy).
        mixed_precision: "none", "mixed_bfloat16" or "mixed_float16".
        jit_compile: XLA-compile the train step.
        steps_per_epoch: steps between validation passes and Keras epoch logs.
        checkpoint_every_steps / checkpoint_every_minutes: checkpoint when either is reached.
        keep_checkpoints: checkpoints kept on disk.
        average_last: checkpoints averaged into the final weights (paper: 5 base, 20 big).
        log_every_steps: TensorBoard scalars interval.
        seed: for weights, shuffling and dropout.
        eval_beam_size, eval_alpha, eval_limit: BLEU evaluation on the test split at the end
            (eval_limit=0: no evaluation; None: the whole split).
        data_dir: TFDS data directory for WMT.
    """

    model: str = "tiny"
    dataset: str = "sample_en_de"
    model_dir: str = "runs/sample_en_de"
    train_steps: int = 1800
    vocab_size: int = 4000
    batch_tokens: int = 1536
    max_length: int = 128
    warmup_steps: int = 400
    learning_rate_scale: float = 1.0
    label_smoothing: float = 0.1
    dropout: float | None = None
    num_layers: int | None = None
    d_model: int | None = None
    d_ff: int | None = None
    num_heads: int | None = None
    norm_position: str | None = None
    strategy: str = "auto"
    cpu_replicas: int = 0
    mixed_precision: str = "none"
    jit_compile: bool = False
    steps_per_epoch: int = 100
    checkpoint_every_steps: int = 100
    checkpoint_every_minutes: float = 10.0
    keep_checkpoints: int = 5
    average_last: int = 5
    log_every_steps: int = 20
    seed: int = 1234
    eval_beam_size: int = 4
    eval_alpha: float = 0.6
    eval_limit: int | None = None
    data_dir: str | None = None

    def __post_init__(self) -> None:
        for name in ("train_steps", "vocab_size", "batch_tokens", "max_length", "warmup_steps"):
            _check_positive_int(name, getattr(self, name))
        for name in ("steps_per_epoch", "checkpoint_every_steps", "keep_checkpoints"):
            _check_positive_int(name, getattr(self, name))
        _check_positive_int("average_last", self.average_last)
        _check_positive_int("log_every_steps", self.log_every_steps)
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
        if self.cpu_replicas < 0 or self.checkpoint_every_minutes <= 0:
            raise ValueError(
                "cpu_replicas must be >= 0 and checkpoint_every_minutes > 0. Received: "
                f"cpu_replicas={self.cpu_replicas}, "
                f"checkpoint_every_minutes={self.checkpoint_every_minutes}"
            )

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
