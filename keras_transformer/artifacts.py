"""The layout of a model directory written by training and read by evaluation and export.

MODEL_DIR/
  config.json            TransformerConfig.to_dict()
  spm.model              the shared SentencePiece model
  checkpoints/           ckpt-<step>.weights.h5 files (model + optimizer state)
  final.weights.h5       the final (averaged) weights, written at the end of training
  logs/                  TensorBoard event files
  summary.json           figures of the finished run
  training_config.json   the run's TrainingConfig (training.preflight)
  plan.json              a run planned to a time budget: its plans (training.budget)
"""

from __future__ import annotations

import glob
import json
import os
import re

import keras

from keras_transformer.checks import check_choice
from keras_transformer.config import (
    AlignmentOptions,
    SearchOptions,
    TransformerConfig,
    eval_alpha_for,
)
from keras_transformer.constants import INFERENCE_DTYPES
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.model import build_transformer

CONFIG_FILE = "config.json"
TOKENIZER_FILE = "spm.model"
CHECKPOINT_DIR = "checkpoints"
FINAL_WEIGHTS = "final.weights.h5"
LOG_DIR = "logs"
SUMMARY_FILE = "summary.json"
RUN_CONFIG_FILE = "training_config.json"
PLAN_FILE = "plan.json"
_CHECKPOINT_NAME = re.compile(r"ckpt-(\d+)\.weights\.h5$")


def path(model_dir: str, name: str) -> str:
    return os.path.join(model_dir, name)


def save_config(model_dir: str, config: TransformerConfig) -> None:
    os.makedirs(model_dir, exist_ok=True)
    with open(path(model_dir, CONFIG_FILE), "w") as f:
        json.dump(config.to_dict(), f, indent=2)


def load_config(model_dir: str) -> TransformerConfig:
    config_path = path(model_dir, CONFIG_FILE)
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"No {CONFIG_FILE} in model_dir={model_dir!r}: not a trained model")
    with open(config_path) as f:
        return TransformerConfig.from_dict(json.load(f))


def load_run_config(model_dir: str) -> dict | None:
    """The run's `training_config.json` as written (`TrainingConfig` fields of the version
    that trained it), or None where there is none (a model trained elsewhere)."""
    run_file = path(model_dir, RUN_CONFIG_FILE)
    if not os.path.isfile(run_file):
        return None
    with open(run_file) as f:
        return json.load(f)


def run_eval_alpha(model_dir: str) -> float:
    """The length penalty alpha the run in `model_dir` evaluated and exported with: its
    training_config.json's `eval_alpha`, or `eval_alpha_for` its preset; the paper's 0.6 for
    a model directory without that file (a model trained elsewhere)."""
    run = load_run_config(model_dir)
    if run is None:
        return SearchOptions.alpha
    return float(eval_alpha_for(run.get("model", ""), run.get("eval_alpha")))


def run_alignment(model_dir: str) -> AlignmentOptions:
    """The cross-attention that word alignments of the run in `model_dir` read: the guided
    head where it trained with `--guided-alignment` (its training_config.json's
    `guided_alignment`), else `AlignmentOptions()`'s default."""
    run = load_run_config(model_dir) or {}
    return AlignmentOptions.guided() if run.get("guided_alignment") else AlignmentOptions()


def checkpoint_path(directory: str, step: int) -> str:
    """The checkpoint file of `step` in a checkpoint directory."""
    return os.path.join(directory, f"ckpt-{step:08d}.weights.h5")


def list_checkpoints(directory: str) -> list[tuple[int, str]]:
    """`[(step, path), ...]` of a checkpoint directory, sorted by step."""
    found = []
    for checkpoint in glob.glob(os.path.join(directory, "ckpt-*.weights.h5")):
        match = _CHECKPOINT_NAME.search(os.path.basename(checkpoint))
        if match:
            found.append((int(match.group(1)), checkpoint))
    return sorted(found)


def latest_checkpoint_in(directory: str) -> str | None:
    """The newest checkpoint file of a checkpoint directory, or None."""
    found = list_checkpoints(directory)
    return found[-1][1] if found else None


def latest_checkpoint(model_dir: str) -> str | None:
    """The newest checkpoint of a model directory, or None."""
    return latest_checkpoint_in(path(model_dir, CHECKPOINT_DIR))


def restore_weights(model: keras.Model, model_dir: str, weights: str | None = None) -> str:
    """Load weights into `model`: a `.weights.h5` file, or by default the final weights if
    present, else the latest checkpoint. Returns the path loaded."""
    if weights is None:
        final = path(model_dir, FINAL_WEIGHTS)
        weights = final if os.path.exists(final) else latest_checkpoint(model_dir)
    if weights is None:
        raise FileNotFoundError(f"No weights or checkpoints in model_dir={model_dir!r}")
    model.load_weights(weights)
    return weights


def load_trained(
    model_dir: str, weights: str | None = None, dtype: str = "float32"
) -> tuple[keras.Model, TransformerConfig, SubwordTokenizer]:
    """Rebuild a trained model from its directory: `(model, config, tokenizer)`.

    `dtype` "bfloat16" builds it under Keras' "bfloat16" policy (weights and activations in
    bfloat16; layer norms and the attention softmax still compute in float32) and casts the
    weights on loading: an inference path for CPUs with bfloat16 matrix units (AMX,
    AVX512_BF16) and GPUs (benchmarks/README.md, "A bfloat16 inference path").
    """
    check_choice("dtype", dtype, INFERENCE_DTYPES)
    config = load_config(model_dir)
    model = build_transformer(config, dtype=dtype)
    restore_weights(model, model_dir, weights)
    tokenizer = SubwordTokenizer.from_file(path(model_dir, TOKENIZER_FILE))
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(
            f"Tokenizer vocab_size={tokenizer.vocab_size} differs from the model's "
            f"vocab_size={config.vocab_size} in {model_dir!r}"
        )
    return model, config, tokenizer
