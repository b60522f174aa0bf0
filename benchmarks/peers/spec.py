"""The one workload every system runs: sizes, the random batch and our configs built from them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from keras_transformer.config import SearchOptions, TrainingConfig, TransformerConfig
from keras_transformer.constants import BOS_ID, EOS_ID  # both plain Python: no TensorFlow


class Unsupported(Exception):
    """A system that cannot run this workload (reported as skipped, with why)."""


FIRST_WORD_ID = EOS_ID + 1  # random ids after the special ids: no padding, no EOS in inputs


@dataclass(frozen=True)
class Spec:
    """What one measurement runs, for every system alike.

    Args:
        config: `TransformerConfig` preset ("base", "tiny", "quick"); dropout is 0 for all
            systems (PyTorch's layers tie attention dropout to P_drop, ours has none).
        vocab_size: the shared vocabulary (one embedding matrix, also the output projection).
        batch: sentences per batch.
        length: source and target tokens per sentence (no padding).
        steps: training steps, or decoded batches, per measurement.
        beam: beam width of decoding.
        out_length: forced output tokens of decoding (EOS suppressed).
        warmup_steps: of the paper's learning-rate schedule (paper: 4000).
        label_smoothing: eps_ls of the loss (paper: 0.1).
        norm_position: "pre" or "post" (the paper's); None keeps the preset's (base and tiny:
            post, quick: pre).
    """

    config: str = "base"
    vocab_size: int = 32000
    batch: int = 32
    length: int = 32
    steps: int = 5
    beam: int = SearchOptions.beam_size
    out_length: int = 32
    warmup_steps: int = 4000
    label_smoothing: float = TransformerConfig.label_smoothing
    norm_position: str | None = None

    def replace(self, **changes) -> Spec:
        return dataclasses.replace(self, **changes)

    @property
    def max_length(self) -> int:
        """Positions the models are built for: the longest source or output."""
        return max(self.length, self.out_length) + 1

    def model_config(self):
        """Our `TransformerConfig` of these sizes (the peers copy its numbers)."""
        norm = {} if self.norm_position is None else {"norm_position": self.norm_position}
        return TransformerConfig.preset(
            self.config, self.vocab_size, dropout=0.0, max_length=self.max_length,
            label_smoothing=self.label_smoothing, **norm,
        )  # fmt: skip

    def training_config(self):
        """The `TrainingConfig` whose optimizer `trainer.compile_model` builds."""
        return TrainingConfig.from_flat(
            model=self.config, vocab_size=self.vocab_size, dropout=0.0,
            batch_tokens=self.batch * self.length, max_length=self.length,
            warmup_steps=self.warmup_steps, label_smoothing=self.label_smoothing,
        )  # fmt: skip


def train_batch(spec: Spec, seed: int = 0) -> dict[str, np.ndarray]:
    """One batch of random sentences, int32 (batch, length) each: "source", "labels" (the
    reference) and "target" (BOS + the reference shifted right, our decoder input)."""
    rng = np.random.default_rng(seed)
    shape = (spec.batch, spec.length)
    source = rng.integers(FIRST_WORD_ID, spec.vocab_size, shape, dtype=np.int32)
    labels = rng.integers(FIRST_WORD_ID, spec.vocab_size, shape, dtype=np.int32)
    bos = np.full((spec.batch, 1), BOS_ID, np.int32)
    target = np.concatenate([bos, labels[:, :-1]], axis=1)  # -> (batch, length)
    return {"source": source, "target": target, "labels": labels}


def decode_sources(spec: Spec, seed: int = 1) -> np.ndarray:
    """int32 (batch, length) random source ids ending with EOS, as our tokenizer's sources."""
    rng = np.random.default_rng(seed)
    words = rng.integers(FIRST_WORD_ID, spec.vocab_size, (spec.batch, spec.length - 1))
    eos = np.full((spec.batch, 1), EOS_ID)
    return np.concatenate([words, eos], axis=1).astype(np.int32)  # -> (batch, length)
