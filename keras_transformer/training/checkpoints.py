"""Step-numbered checkpoints (`ckpt-00001200.weights.h5`, model and optimizer state), keeping the
last K, and averaging of the last K into final weights (paper, section 6.1: 5 for base, 20
for big)."""

from __future__ import annotations

import glob
import logging
import os
import re

import keras
import numpy as np

logger = logging.getLogger("keras_transformer")
_PATTERN = re.compile(r"ckpt-(\d+)\.weights\.h5$")


def checkpoint_path(directory: str, step: int) -> str:
    return os.path.join(directory, f"ckpt-{step:08d}.weights.h5")


def list_checkpoints(directory: str) -> list[tuple[int, str]]:
    """`[(step, path), ...]` sorted by step."""
    found = []
    for path in glob.glob(os.path.join(directory, "ckpt-*.weights.h5")):
        match = _PATTERN.search(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(directory: str) -> str | None:
    checkpoints = list_checkpoints(directory)
    return checkpoints[-1][1] if checkpoints else None


def save_checkpoint(model: keras.Model, directory: str, step: int, keep: int) -> str:
    """Write model + optimizer state atomically, then delete all but the last `keep`."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1. Received: keep={keep}")
    os.makedirs(directory, exist_ok=True)
    path = checkpoint_path(directory, step)
    partial = os.path.join(directory, f"partial-{os.path.basename(path)}")
    model.save_weights(partial, overwrite=True)
    os.replace(partial, path)  # a killed run never leaves a half-written checkpoint
    for _, old in list_checkpoints(directory)[:-keep]:
        os.remove(old)
    return path


def restore_checkpoint(model: keras.Model, path: str) -> None:
    """Restore model (and, if compiled, optimizer) state from `path`."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)
    model.load_weights(path)


def average_checkpoints(model: keras.Model, paths: list[str]) -> list[np.ndarray]:
    """Load each checkpoint into `model` and return the element-wise mean of its weights.

    The model ends up holding the averaged weights.
    """
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint. Received: []")
    total = None
    for path in paths:
        restore_checkpoint(model, path)
        weights = [w.astype(np.float64) for w in model.get_weights()]
        total = weights if total is None else [t + w for t, w in zip(total, weights)]
    averaged = [(t / len(paths)).astype(w.dtype) for t, w in zip(total, model.get_weights())]
    model.set_weights(averaged)
    logger.info("Averaged %d checkpoints: %s", len(paths), ", ".join(map(os.path.basename, paths)))
    return averaged
