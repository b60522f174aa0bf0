"""Checks a training run makes in its first seconds, before TensorFlow starts: the model
directory is writable, a run already there was trained with the same model and vocabulary,
the corpus has a usable pair, the flags agree with each other and with TF_CONFIG. Each raises
a ValueError that names the value. Once the strategy and the dtype policy are known,
`check_resume` refuses a checkpoint written with other replicas, micro-batches or precision.

`MODEL_DIR/training_config.json` records the `TrainingConfig` of the run by flat name
(`TrainingConfig.to_flat`, written by the chief), so a rerun can tell "same run, resume it"
from "another run, refuse".
"""

from __future__ import annotations

import json
import logging
import os
import tempfile

from keras_transformer import artifacts
from keras_transformer.config import TrainingConfig
from keras_transformer.data import corpus
from keras_transformer.training import distribute

logger = logging.getLogger("keras_transformer")
# Fields that fix the vocabulary (spm.model): another value needs another model_dir. `dataset`
# is the whole training spec (text:SRC,TGT files, a mix with its weights); dev_dataset and
# test_dataset train nothing and may change; `reverse` is checked on its own (same vocabulary,
# the other direction).
VOCABULARY_FIELDS = ("dataset", "vocab_size")
# Fields that fix the order of the training batches: another value resumes, but not exactly.
# The replicas and micro-batches of an update are checked against the checkpoint instead.
DATA_ORDER_FIELDS = ("seed", "batch_tokens", "max_length")
# What a checkpoint records of its run (`trainer._run_description`) that a resume must keep:
# replicas x micro-batches make the global batch and the batches a resume skips (start step
# x micro-batches of the new global size), and the dtype policy the optimizer's variables
# (mixed_float16's loss scale) and numbers. Each with why another value cannot resume.
RESUME_FIELDS = {
    "replicas": "the global batch and the batches a resume skips change",
    "accumulate_steps": "the global batch and the batches a resume skips change",
    "precision": "the optimizer's state and the numerics change",
}


def check_run(cfg: TrainingConfig, chief: bool = True) -> None:
    """All checks that need no TensorFlow (call before creating the strategy)."""
    devices = cfg.distribution
    strategy = distribute.strategy_name(devices.strategy, devices.cpu_replicas)
    distribute.check_jit_compile(strategy, devices.jit_compile, devices.cpu_replicas)
    check_model_dir_writable(cfg.run.model_dir, chief)
    check_same_run(cfg)
    check_corpus(cfg)


def check_model_dir_writable(model_dir: str, chief: bool = True) -> None:
    if not model_dir:
        raise ValueError(f"model_dir must be a directory path. Received: model_dir={model_dir!r}")
    if not chief:
        return  # workers only read it (the chief's files)
    try:
        os.makedirs(model_dir, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=model_dir, prefix=".write-test-"):
            pass
    except OSError as error:
        raise ValueError(
            f"model_dir is not a writable directory ({error.strerror or error}). "
            f"Received: model_dir={model_dir!r}"
        ) from None


def check_same_run(cfg: TrainingConfig, vocab_size: int | None = None) -> None:
    """Refuse a model_dir trained with another model config or vocabulary.

    Args:
        cfg: the requested run.
        vocab_size: the tokenizer's real vocabulary size if known (else config.json's).
    """
    saved_run, flat = artifacts.load_run_config(cfg.run.model_dir), cfg.to_flat()
    if saved_run is not None:
        for name in VOCABULARY_FIELDS:
            if saved_run.get(name) != flat[name]:
                raise ValueError(
                    f"model_dir={cfg.run.model_dir!r} holds a run with another vocabulary: "
                    f"{name}={saved_run.get(name)!r} there, {name}={flat[name]!r} "
                    "requested. Use another --model-dir"
                )
        if saved_run.get("reverse", False) != cfg.data.reverse:  # runs before it had no field
            raise ValueError(
                f"model_dir={cfg.run.model_dir!r} holds a run in the other direction: "
                f"reverse={saved_run.get('reverse', False)} there, reverse={cfg.data.reverse} "
                "requested. Use another --model-dir"
            )
        changed = [n for n in DATA_ORDER_FIELDS if saved_run.get(n) != flat[n]]
        if changed:
            logger.warning(
                "Resuming with other %s than the run in %s: the batch order differs from an "
                "uninterrupted run's", ", ".join(changed), cfg.run.model_dir,
            )  # fmt: skip
    if not os.path.exists(artifacts.path(cfg.run.model_dir, artifacts.CONFIG_FILE)):
        return
    saved = artifacts.load_config(cfg.run.model_dir)
    requested = cfg.architecture.model_config(vocab_size or saved.vocab_size).to_dict()
    diff = {k: (v, requested[k]) for k, v in saved.to_dict().items() if requested[k] != v}
    if diff:
        described = ", ".join(f"{k}={a!r} there, {b!r} requested" for k, (a, b) in diff.items())
        raise ValueError(
            f"model_dir={cfg.run.model_dir!r} holds a model with another config.json ({described})."
            " Use another --model-dir, or the flags of that run"
        )


def check_resume(checkpoint: str, recorded: dict, current: dict) -> None:
    """Refuse to resume `checkpoint` with other `RESUME_FIELDS` than it was written with.

    Args:
        checkpoint: the checkpoint's path (named in the error).
        recorded: what it records of its run (`checkpoints.checkpoint_run`); a field it
            lacks (written before the field was recorded) is not checked.
        current: the same of this run (`trainer._run_description`).

    Raises:
        ValueError: naming the field's two values.
    """
    for name, why in RESUME_FIELDS.items():
        if name in recorded and recorded[name] != current[name]:
            raise ValueError(
                f"{checkpoint} was written with {name}={recorded[name]!r}: resuming it with "
                f"{name}={current[name]!r}, {why}. Resume with that run's set-up, or use another "
                f"--model-dir. Received: {name}={current[name]!r}, checkpoint's "
                f"{name}={recorded[name]!r}"
            )


def save_run_config(cfg: TrainingConfig) -> None:
    """Write `training_config.json` (chief only), atomically: `cfg.to_flat()`, the flat
    names a rerun, a child run (`warm_start`) and `artifacts.run_eval_alpha` read."""
    path = artifacts.path(cfg.run.model_dir, artifacts.RUN_CONFIG_FILE)
    partial = path + ".partial"
    with open(partial, "w") as f:
        json.dump(cfg.to_flat(), f, indent=2)
    os.replace(partial, path)


def check_corpus(cfg: TrainingConfig) -> None:
    """Every corpus of the training split (each of a mix) and an explicitly given dev or test
    file has at least one usable pair; a `text:` source and target file of different lengths
    raise here, naming both counts. Files only: TFDS checks its own."""
    for part in corpus.mix_parts(cfg.data.dataset):
        if not corpus.uses_tfds(part.dataset):
            _check_has_pair(part.dataset, "train", "The training split")
    for split in ("dev", "test"):
        dataset, part = cfg.data.split_dataset(split)
        if part == corpus.ALL:
            _check_has_pair(dataset, part, f"The {split} file")


def _check_has_pair(dataset: str, split: str, name: str) -> None:
    stats = corpus.CorpusStats()
    if next(corpus.read_pairs(dataset, split, limit=1, stats=stats), None) is None:
        raise ValueError(
            f"{name} has no usable 'source<TAB>target' pair ({stats.log_line()}). "
            f"Received: dataset={dataset!r}"
        )
