"""Step-numbered checkpoints (`ckpt-00001200.weights.h5`), keeping the last K, and averaging of
the last K into final weights (paper, section 6.1: 5 for base, 20 for big).

A checkpoint is a Keras weights file (model and optimizer state, so `model.load_weights` and
checkpoint averaging read it as is) plus a `training_state` group with what Keras does not
save but an exact resume needs: the state of every dropout `SeedGenerator` (`rng/<i>`, in
`model.variables` order), the step and the optimizer's state outside its weights (the count of
skipped non-finite steps; under float16 the loss scale and its skips). The data
position is the step: the training stream is a deterministic function of the seed, and a
resumed run skips the batches already seen. Nothing is written unless every weight and
optimizer variable is finite.
"""

from __future__ import annotations

import logging
import os

import h5py
import keras
import numpy as np

from keras_transformer.artifacts import checkpoint_path, latest_checkpoint_in, list_checkpoints
from keras_transformer.training.nonfinite import check_finite

logger = logging.getLogger("keras_transformer")
STATE_GROUP = "training_state"


def rng_variables(model: keras.Model) -> list:
    """The model's random state: `SeedGenerator` variables (dropout), which `model.weights` and
    Keras weights files leave out."""
    weights = {id(v) for v in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def save_checkpoint(
    model: keras.Model,
    directory: str,
    step: int,
    keep: int,
    run: dict | None = None,
    preempted: bool = False,
) -> str:
    """Write model + optimizer + RNG state atomically, then delete all but the last `keep`.
    `run` (names to ints or strings: replicas, global batch) is stored beside the step, for
    `checkpoint_run`.

    A `preempted` checkpoint (written off the schedule when the run was stopped by a signal)
    is there to resume from: it takes no place among the `keep` and goes when a later
    checkpoint is written, so the checkpoints a finished run keeps and averages are those of
    an uninterrupted run.

    Raises `NonFiniteLossError` (and writes nothing) if a weight or optimizer variable is not
    finite.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1. Received: keep={keep}")
    optimizer = getattr(model, "optimizer", None)
    state = list(model.weights) + (list(optimizer.variables) if optimizer is not None else [])
    check_finite(state, step, latest_checkpoint_in(directory))
    os.makedirs(directory, exist_ok=True)
    path = checkpoint_path(directory, step)
    partial = os.path.join(directory, f"partial-{os.path.basename(path)}")
    model.save_weights(partial, overwrite=True)
    with h5py.File(partial, "a") as f:
        group = f.create_group(STATE_GROUP)
        group.attrs["step"] = step
        group.attrs["preempted"] = int(preempted)
        for name, value in (run or {}).items():
            group.attrs[name] = value
        for name, variable in _optimizer_state(optimizer).items():
            group.attrs[name] = keras.ops.convert_to_numpy(variable).item()
        for i, variable in enumerate(rng_variables(model)):
            group.create_dataset(f"rng/{i}", data=keras.ops.convert_to_numpy(variable))
    os.replace(partial, path)  # a killed run never leaves a half-written checkpoint
    scheduled = []
    for old_step, old in list_checkpoints(directory):
        if old_step < step and checkpoint_run(old).get("preempted"):
            os.remove(old)  # superseded for resuming; never averaged
        elif old == path or not checkpoint_run(old).get("preempted"):
            scheduled.append(old)
    if preempted:
        scheduled.remove(path)
    for old in scheduled[:-keep]:
        os.remove(old)
    return path


def checkpoint_run(path: str) -> dict:
    """The step and the run's description (`save_checkpoint`'s `run`) stored in `path`."""
    with h5py.File(path, "r") as f:
        if STATE_GROUP not in f:
            return {}
        return {
            name: value.item() if hasattr(value, "item") else value
            for name, value in f[STATE_GROUP].attrs.items()
        }


def _optimizer_state(optimizer) -> dict:
    """The optimizer's state that its weights leave out, by name (`GuardedAccumulatingAdam`:
    the skip counters and the loss scale), for the training_state."""
    return optimizer.checkpoint_state() if hasattr(optimizer, "checkpoint_state") else {}


def restore_checkpoint(model: keras.Model, path: str, rng: bool = True) -> None:
    """Restore model (and, if compiled, optimizer) state from `path`, and (if `rng`) the
    dropout RNG state the checkpoint holds."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)
    model.load_weights(path)
    if not rng:
        return
    with h5py.File(path, "r") as f:
        state = f[STATE_GROUP] if STATE_GROUP in f else None
        for name, variable in _optimizer_state(optimizer).items():
            if state is not None and name in state.attrs:  # else (older file) its initial value
                variable.assign(state.attrs[name])
        saved = state["rng"] if state is not None and "rng" in state else None
        variables = rng_variables(model)
        if saved is None or len(saved) != len(variables):
            logger.warning(
                "%s has no matching RNG state (%s saved, %d in the model): dropout restarts "
                "from fresh seeds", path, "none" if saved is None else len(saved), len(variables),
            )  # fmt: skip
            return
        for i, variable in enumerate(variables):
            variable.assign(saved[str(i)][()])


def average_checkpoints(model: keras.Model, paths: list[str]) -> list[np.ndarray]:
    """Load each checkpoint into `model` and return the element-wise mean of its weights.

    The model ends up holding the averaged weights.
    """
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint. Received: []")
    total = None
    for path in paths:
        restore_checkpoint(model, path, rng=False)
        weights = [w.astype(np.float64) for w in model.get_weights()]
        total = weights if total is None else [t + w for t, w in zip(total, weights)]
    averaged = [(t / len(paths)).astype(w.dtype) for t, w in zip(total, model.get_weights())]
    model.set_weights(averaged)
    logger.info("Averaged %d checkpoints: %s", len(paths), ", ".join(map(os.path.basename, paths)))
    return averaged
