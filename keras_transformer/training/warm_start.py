"""Warm starts: fine-tune another run's model (`init_from`), reuse an existing SentencePiece
model (`vocab`) and freeze part of the model (`freeze`).

    cfg = warm_start.resolve(cfg)                 # first: file checks only, no TensorFlow
    warm_start.copy_vocabulary(source, spm_path)  # instead of training a SentencePiece model
    warm_start.load_parent_weights(model, cfg.warm_start.init_from)  # without checkpoints
    warm_start.freeze(model, cfg.warm_start.freeze)  # before compile

A child of `init_from` gets the parent's `spm.model` (byte for byte) and architecture: a field
of `TrainingConfig.architecture` left at its default takes the parent's value, another value
is refused with both values named. The training recipe (learning rate, warm-up, steps,
dropout, label smoothing, dataset, batches) is the child's, and its optimizer starts fresh
at step 0, so warm-up runs again. A rerun of the child resumes from its own checkpoints.
"""

from __future__ import annotations

import filecmp
import logging
import os
import shutil
from dataclasses import dataclass

import keras
import numpy as np

from keras_transformer import artifacts, constants
from keras_transformer.config import ArchitectureConfig, TrainingConfig, TransformerConfig
from keras_transformer.data import prepared_manifest as manifests

logger = logging.getLogger("keras_transformer")
# ArchitectureConfig fields that override a preset's sizes (None: the preset's).
SIZE_FIELDS = (
    "num_layers", "d_model", "d_ff", "num_heads", "d_k", "d_v", "norm_position",
    "positional_encoding",
)  # fmt: skip
# TransformerConfig fields a child may change: the loss and regularization, not the weights.
RECIPE_FIELDS = ("dropout", "label_smoothing")


@dataclass(frozen=True)
class Parent:
    """The run a child starts from.

    Args:
        run_dir: its model directory (config.json, spm.model).
        weights: the `.weights.h5` file the child loads.
        config: its `TransformerConfig`.
        run: its `training_config.json` (None if it has none).
    """

    run_dir: str
    weights: str
    config: TransformerConfig
    run: dict | None

    @property
    def tokenizer_file(self) -> str:
        return artifacts.path(self.run_dir, artifacts.TOKENIZER_FILE)


def parent_run(init_from: str) -> Parent:
    """The parent of `init_from`: a run directory (its final weights) or a `.weights.h5` file
    of a run (`RUN/best.weights.h5`, `RUN/checkpoints/ckpt-N.weights.h5`). A missing file is
    a ValueError that names it."""
    if init_from.endswith(".weights.h5"):
        weights = init_from
        run_dir = os.path.dirname(os.path.abspath(init_from))
        if os.path.basename(run_dir) == artifacts.CHECKPOINT_DIR:
            run_dir = os.path.dirname(run_dir)
    else:
        run_dir, weights = init_from, artifacts.path(init_from, artifacts.FINAL_WEIGHTS)
    hint = {
        weights: " (an unfinished run has none: pass one of its checkpoints/*.weights.h5)",
        artifacts.path(run_dir, artifacts.TOKENIZER_FILE): "",
        artifacts.path(run_dir, artifacts.CONFIG_FILE): "",
    }
    for required, why in hint.items():
        if not os.path.isfile(required):
            raise ValueError(
                f"init_from needs {required}, which does not exist{why}. "
                f"Received: init_from={init_from!r}"
            )
    return Parent(
        run_dir, weights, artifacts.load_config(run_dir), artifacts.load_run_config(run_dir)
    )


def piece_count(vocab: str) -> int:
    """Pieces of the SentencePiece model `vocab`, which must use this project's special ids
    (0 pad, 1 unk, 2 bos, 3 eos); a ValueError naming the file otherwise."""
    import sentencepiece

    if not os.path.isfile(vocab):
        raise ValueError(f"vocab must be a SentencePiece .model file. Received: vocab={vocab!r}")
    try:
        processor = sentencepiece.SentencePieceProcessor(model_file=vocab)
    except (RuntimeError, OSError) as error:
        raise ValueError(
            f"vocab is not a SentencePiece model ({error}). Received: vocab={vocab!r}"
        ) from None
    ids = dict(
        pad_id=processor.pad_id(), unk_id=processor.unk_id(),
        bos_id=processor.bos_id(), eos_id=processor.eos_id(),
    )  # fmt: skip
    expected = dict(
        pad_id=constants.PAD_ID, unk_id=constants.UNK_ID,
        bos_id=constants.BOS_ID, eos_id=constants.EOS_ID,
    )  # fmt: skip
    if ids != expected:
        raise ValueError(
            f"vocab has special ids {ids}; the model needs {expected} (a vocabulary trained by "
            f"this tool or `train_sentencepiece`). Received: vocab={vocab!r}"
        )
    return processor.get_piece_size()


def vocabulary_source(cfg: TrainingConfig) -> str | None:
    """The SentencePiece model a run copies instead of training one (None: it trains one)."""
    if cfg.warm_start.init_from is not None:
        return parent_run(cfg.warm_start.init_from).tokenizer_file
    return cfg.warm_start.vocab


def resolve(cfg: TrainingConfig) -> TrainingConfig:
    """`cfg` with the architecture of its `init_from` run and the vocabulary size of its
    `vocab` (unchanged without either). Refuses, with a ValueError naming both values, a
    conflicting architecture flag, two vocabularies, or a model_dir trained otherwise. A
    prepared corpus (`prepared:DIR`) without `vocab` or `init_from` brings its vocabulary."""
    _check_freeze_unchanged(cfg)
    init_from, vocab = cfg.warm_start.init_from, cfg.warm_start.vocab
    if init_from is None and vocab is None and manifests.is_prepared(cfg.data.dataset):
        vocab = manifests.load(cfg.data.dataset).vocabulary_file  # the corpus's own
        cfg = cfg.replace(vocab=vocab)
    if init_from is None and vocab is None:
        return cfg
    pieces = piece_count(vocab) if vocab is not None else None
    vocab_size = cfg.architecture.vocab_size
    if init_from is not None:
        parent = parent_run(init_from)
        source = parent.tokenizer_file
        if vocab is not None and not filecmp.cmp(vocab, source, shallow=False):
            raise ValueError(
                f"init_from's vocabulary {source} differs from vocab={vocab!r}: a child "
                "keeps its parent's vocabulary (leave out --vocab)"
            )
        cfg = _inherit(cfg, parent)
    elif vocab_size not in (ArchitectureConfig.vocab_size, pieces):
        raise ValueError(
            f"vocab={vocab!r} has {pieces} pieces, vocab_size={vocab_size} requested: "
            "leave out --vocab-size (the vocabulary's own size is used)"
        )
    else:
        source, cfg = vocab, cfg.replace(vocab_size=pieces)
    own = artifacts.path(cfg.run.model_dir, artifacts.TOKENIZER_FILE)
    if os.path.isfile(own) and not filecmp.cmp(own, source, shallow=False):
        raise ValueError(
            f"model_dir={cfg.run.model_dir!r} holds another spm.model than {source}. "
            "Use another --model-dir"
        )
    return cfg


def _inherit(cfg: TrainingConfig, parent: Parent) -> TrainingConfig:
    """The child's `TrainingConfig`: the parent's architecture, the child's recipe."""
    theirs, ours, init_from = parent.config, cfg.architecture, cfg.warm_start.init_from
    pieces = piece_count(parent.tokenizer_file)
    if pieces != theirs.vocab_size:
        raise ValueError(
            f"init_from={init_from!r} is inconsistent: its spm.model has {pieces} pieces, "
            f"its config.json vocab_size={theirs.vocab_size}"
        )
    default_model = ours.model == ArchitectureConfig.model
    requested = {}  # TransformerConfig field -> (value, how it was requested)
    if not default_model and ours.model != (parent.run or {}).get("model"):
        preset = TransformerConfig.preset(ours.model, theirs.vocab_size)
        requested.update({n: (getattr(preset, n), f"model={ours.model!r}") for n in SIZE_FIELDS})
    for name in SIZE_FIELDS:
        if getattr(ours, name) is not None:
            requested[name] = (getattr(ours, name), f"{name}={getattr(ours, name)!r}")
    if ours.max_length != ArchitectureConfig.max_length:
        requested["max_length"] = (ours.max_length, f"max_length={ours.max_length}")
    parent_vocab_sizes = (theirs.vocab_size, (parent.run or {}).get("vocab_size"))
    if ours.vocab_size not in (ArchitectureConfig.vocab_size, *parent_vocab_sizes):
        requested["vocab_size"] = (ours.vocab_size, f"vocab_size={ours.vocab_size}")
    conflicts = [
        f"{name}={getattr(theirs, name)!r} there, {value!r} requested ({how})"
        for name, (value, how) in requested.items()
        if getattr(theirs, name) != value
    ]
    if conflicts:
        raise ValueError(
            f"init_from={init_from!r} holds another architecture: {', '.join(conflicts)}. "
            "Leave these flags out to take the parent's, or train without --init-from"
        )
    child = cfg.replace(
        model=(parent.run or {}).get("model", ours.model) if default_model else ours.model,
        vocab_size=theirs.vocab_size,
        max_length=theirs.max_length,
        dropout=theirs.dropout if ours.dropout is None else ours.dropout,
        **{name: getattr(theirs, name) for name in SIZE_FIELDS},
    )
    built = child.architecture.model_config(theirs.vocab_size).to_dict()
    other = [k for k, v in theirs.to_dict().items() if k not in RECIPE_FIELDS and built[k] != v]
    if other:
        raise ValueError(
            f"init_from={init_from!r} has a config.json that training flags cannot "
            f"rebuild: {', '.join(f'{k}={theirs.to_dict()[k]!r}' for k in other)}"
        )
    return child


def _check_freeze_unchanged(cfg: TrainingConfig) -> None:
    """A run resumes only with the `freeze` its checkpoints were trained with (the optimizer
    holds state for the trained weights only)."""
    model_dir, freeze = cfg.run.model_dir, cfg.warm_start.freeze
    run = artifacts.load_run_config(model_dir)
    if run is None or artifacts.latest_checkpoint(model_dir) is None:
        return
    saved = run.get("freeze")
    if saved != freeze:
        raise ValueError(
            f"model_dir={model_dir!r} holds checkpoints trained with freeze={saved!r}, "
            f"freeze={freeze!r} requested. Use another --model-dir, or the same --freeze"
        )


def copy_vocabulary(source: str, path: str) -> None:
    """Copy the SentencePiece model `source` to `path` (atomically, byte for byte)."""
    partial = os.path.join(os.path.dirname(path), f".partial-{os.getpid()}-spm.model")
    shutil.copyfile(source, partial)
    os.replace(partial, path)
    logger.info("Vocabulary: %s (copied, no SentencePiece training)", source)


def load_parent_weights(model: keras.Model, init_from: str) -> str:
    """Load the parent's weights (before compile: no optimizer state); returns the file."""
    weights = parent_run(init_from).weights
    model.load_weights(weights)
    logger.info(
        "Initialized from %s; the optimizer starts fresh at step 0 (warm-up again)", weights
    )
    return weights


def trainable_count(model: keras.Model) -> int:
    """Parameters that training updates."""
    return sum(int(np.prod(weight.shape)) for weight in model.trainable_weights)


def freeze(model: keras.Model, part: str | None) -> None:
    """Stop training `part` of the model: "encoder" (its layer stack) or "embeddings" (the
    shared embedding matrix, which is also the pre-softmax projection, and an unshared source
    embedding). Call before compile."""
    if part is None:
        return
    layers = {
        "encoder": [model.encoder],
        "embeddings": [model.token_embedding, model.source_embedding],
    }[part]
    for layer in layers:
        layer.trainable = False
    logger.info(
        "Frozen: %s; %s of %s parameters train",
        part, f"{trainable_count(model):,}", f"{model.count_params():,}",
    )  # fmt: skip
