"""A small untrained model directory (config, SentencePiece model, weights) for tests and
benchmarks of decoding, evaluation and export. The weights are random but fixed by the seed.

    from keras_transformer.testing.model_dir import make_model_dir
    model_dir = make_model_dir(tmp_dir)   # trains a 64-piece SentencePiece model: seconds
"""

from __future__ import annotations

import os

import keras

from keras_transformer import TransformerConfig, artifacts, build_transformer
from keras_transformer.data.tokenizer import train_sentencepiece

# `pipelines/train_wmt.py` flags for a one-layer d_model 32 model over a 60-piece vocabulary:
# end-to-end runs of tests that check plumbing (resume, flags, summaries), not learning. In
# float32 on every machine: tests compare their losses with float32 references, and the
# default policy ("auto") trains in bfloat16 on CPUs with AVX512_BF16 or AMX. Dropout is
# given too (the quick preset's depends on the corpus's size: `training.regularization`).
TINY_TRAIN_FLAGS = [
    "--vocab-size", "60", "--num-layers", "1", "--d-model", "32", "--d-ff", "64",
    "--num-heads", "2", "--mixed-precision", "none", "--dropout", "0",
]  # fmt: skip

SENTENCES = [
    f"{a} {b} number {i}."
    for i in range(40)
    for a, b in (("The cat", "sleeps"), ("Der Hund", "schläft"), ("Le chat", "dort"))
]


def make_model_dir(directory: str, vocab_size: int = 64, seed: int = 0, **overrides) -> str:
    """Write `directory` in the layout of `keras_transformer.artifacts` and return it."""
    values = dict(num_layers=2, d_model=32, d_ff=64, num_heads=4, dropout=0.0, max_length=64)
    values.update(overrides)
    config = TransformerConfig.tiny(vocab_size, **values)
    return write_model_dir(directory, config, SENTENCES, seed)


def make_preset_model_dir(
    directory: str, preset: str, vocab_size: int, texts, seed: int = 0
) -> str:
    """An untrained model of a paper-size preset ("base", "big", ...) with a `vocab_size`
    SentencePiece model trained on `texts`: serving benchmarks at real sizes. Random weights
    almost never choose EOS, so every search runs to its maximum length."""
    config = TransformerConfig.preset(preset, vocab_size)
    return write_model_dir(directory, config, texts, seed)


def write_model_dir(directory: str, config: TransformerConfig, texts, seed: int) -> str:
    """Train the SentencePiece model on `texts`, build `config` with weights drawn from
    `seed`, and write both with the config to `directory`; returns `directory`."""
    os.makedirs(directory, exist_ok=True)
    spm_path = os.path.join(directory, artifacts.TOKENIZER_FILE)
    train_sentencepiece(texts, spm_path, vocab_size=config.vocab_size)
    keras.utils.set_random_seed(seed)
    model = build_transformer(config)
    artifacts.save_config(directory, config)
    model.save_weights(os.path.join(directory, artifacts.FINAL_WEIGHTS))
    return directory
