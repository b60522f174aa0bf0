"""Checks a training run makes in its first seconds, before TensorFlow starts: the model
directory is writable, a run already there was trained with the same model and vocabulary,
the corpus has a usable pair, the flags agree with each other and with TF_CONFIG. Each raises
a ValueError that names the value.

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
DATA_ORDER_FIELDS = ("seed", "batch_tokens", "max_length", "cpu_replicas", "accumulate_steps")


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
