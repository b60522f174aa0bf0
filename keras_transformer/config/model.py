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
from keras_transformer.checks import check_choice, check_int
from keras_transformer.constants import NORM_POSITIONS, POSITIONAL_ENCODINGS

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
