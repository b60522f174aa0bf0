"""The non-finite guard: a NaN or Inf loss or gradient stops the run (or, allowed, skips the
batch) before anything acts on it, on one device and across replicas; a checkpoint never holds
non-finite weights; the training script exits 3 naming the last good checkpoint, and rerunning
resumes from it.

The end-to-end runs use `pipelines/train_wmt.py` on a 300-line TSV corpus with a one-layer
model (`keras_transformer.testing.runs`); the slow one (`-m slow`) diverges and reruns.
"""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.config import TransformerConfig
from keras_transformer.testing.runs import (
    all_finite,
    h5_arrays,
    run,
    run_python,
    train_command,
    write_tsv,
)
from keras_transformer.training import checkpoints
from keras_transformer.training.errors import NonFiniteLossError
from keras_transformer.training.nonfinite import NonFiniteGuard
from keras_transformer.training.optimizer import GuardedAccumulatingAdam


def _dense_run(max_skipped):
    """Six steps on a Dense model; batch 3 holds a NaN. Returns (weights per step, error)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 8, 3)).astype("float32")
    y = rng.normal(size=(6, 8, 1)).astype("float32")
    x[2, 5, 0] = np.nan
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(GuardedAccumulatingAdam(0.1), "mse")
    seen = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: seen.append(
            (int(model.optimizer.iterations.numpy()), model.get_weights()[0].copy(), logs["loss"])
        )
    )
    guard = NonFiniteGuard(max_skipped, lambda: "ckpt-00000002.weights.h5")
    error = None
    try:
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)), verbose=0, callbacks=[guard, record])
    except NonFiniteLossError as raised:
        error = raised
    return model, seen, error


def test_poisoned_batch_stops_training_before_anything_acts_on_it():
    model, seen, error = _dense_run(max_skipped=0)
    assert error is not None and error.step == 3
    assert "non-finite loss or gradients at step 3" in str(error)
    assert "ckpt-00000002.weights.h5" in str(error)
    assert [step for step, _, _ in seen] == [1, 2]  # the guard ran first: no callback saw 3
    assert np.isfinite(model.get_weights()[0]).all()
    np.testing.assert_array_equal(model.get_weights()[0], seen[-1][1])  # step 3 not applied


def test_skip_nonfinite_batches_skips_the_update_and_goes_on():
    model, seen, error = _dense_run(max_skipped=1)
    assert error is None and [step for step, _, _ in seen] == [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(seen[2][1], seen[1][1])  # step 3 left the weights alone
    assert not np.array_equal(seen[3][1], seen[2][1])  # step 4 trained again
    assert np.isfinite(seen[3][2]) and np.isfinite(model.get_weights()[0]).all()  # metrics reset
    assert int(model.optimizer.nonfinite_steps.numpy()) == 1


MIRRORED_GUARD = """
from keras_transformer.training.trainer import configure_devices
configure_devices(2)
import numpy as np, tensorflow as tf, keras
from keras_transformer.training.optimizer import GuardedAccumulatingAdam
rng = np.random.default_rng(0)
x = rng.normal(size=(3, 8, 3)).astype("float32"); y = rng.normal(size=(3, 8, 1)).astype("float32")
x[1, 6, 0] = np.inf  # batch 2, the second replica's half only
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(GuardedAccumulatingAdam(0.1), "mse")
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).take(1), verbose=0)
before = model.get_weights()[0]
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).skip(1).take(1), verbose=0)
after = model.get_weights()[0]
replicas = [v.numpy() for v in strategy.experimental_local_results(model.weights[0].value)]
print(np.array_equal(before, after), np.array_equal(*replicas),
      int(model.optimizer.nonfinite_steps.numpy()), int(model.optimizer.iterations.numpy()))
"""


def test_nonfinite_gradient_on_one_replica_is_skipped_on_all():
    result = run_python(MIRRORED_GUARD, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-4:] == ["True", "True", "1", "2"]


def test_checkpoint_refuses_nonfinite_weights_and_keeps_rng_state(tmp_path):
    config = TransformerConfig.tiny(30, num_layers=1, d_model=16, d_ff=32, num_heads=2)
    from keras_transformer import build_transformer

    model = build_transformer(config)
    directory = str(tmp_path / "checkpoints")
    rng_state = checkpoints.rng_variables(model)
    assert rng_state, "dropout SeedGenerator states are the RNG state to save"
    rng_state[0].assign(np.array([7, 41], dtype="int64"))
    path = checkpoints.save_checkpoint(model, directory, 10, keep=2)
    rng_state[0].assign(np.array([0, 0], dtype="int64"))
    checkpoints.restore_checkpoint(model, path)
    np.testing.assert_array_equal(rng_state[0].numpy(), [7, 41])
    weights = model.get_weights()
    weights[3][0] = np.nan
    model.set_weights(weights)
    with pytest.raises(NonFiniteLossError, match="non-finite weights .* at step 20.*ckpt-00000010"):
        checkpoints.save_checkpoint(model, directory, 20, keep=2)
    assert [step for step, _ in artifacts.list_checkpoints(directory)] == [10]
    assert os.listdir(directory) == ["ckpt-00000010.weights.h5"]  # no partial file left


def test_nonfinite_run_exits_3_and_writes_nothing_from_it(tmp_path):
    write_tsv(tmp_path / "pairs.tsv")
    model_dir = tmp_path / "run"
    command = train_command(tmp_path / "pairs.tsv", model_dir, "--learning-rate-scale", "1e9")
    result = run(command + ["--checkpoint-every-steps", "2", "--export-dir", str(tmp_path / "x")])
    assert result.returncode == 3, result.stderr[-3000:]
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: non-finite loss or gradients at step "), error
    step = int(error.split("at step ")[1].split(":")[0])
    found = artifacts.list_checkpoints(str(model_dir / "checkpoints"))
    assert all(saved < step and all_finite(path) for saved, path in found)
    assert (f"last good checkpoint: {found[-1][1]}" if found else "no checkpoint") in error
    for name in ("final.weights.h5", "summary.json"):
        assert not (model_dir / name).exists()
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_nonfinite_run_resumes_from_last_finite_checkpoint(tmp_path):
    write_tsv(tmp_path / "pairs.tsv")
    model_dir = tmp_path / "run"

    def command(*flags, steps):
        return train_command(tmp_path / "pairs.tsv", model_dir, *flags, steps=steps, every=3)

    assert run(command(steps=6)).returncode == 0
    final = h5_arrays(model_dir / "final.weights.h5")
    # Diverge from step 6 on; no checkpoint is due before the loss blows up.
    diverging = command("--learning-rate-scale", "1e9", "--checkpoint-every-steps", "100", steps=40)
    result = run(diverging)
    assert result.returncode == 3, result.stderr[-3000:]
    assert "ckpt-00000006.weights.h5, rerunning resumes from it" in result.stderr
    assert [s for s, _ in artifacts.list_checkpoints(str(model_dir / "checkpoints"))][-1] == 6
    after = h5_arrays(model_dir / "final.weights.h5")
    assert all(np.array_equal(final[k], after[k]) for k in final)  # untouched
    # Allowing 2 skips: two logged skips, then the third bad batch stops the run.
    result = run(diverging + ["--skip-nonfinite-batches", "2"])
    assert result.returncode == 3, result.stderr[-3000:]
    assert result.stderr.count("batch skipped, no update applied") == 2
    # Back to a sane learning rate: resumes from step 6 and finishes.
    result = run(command(steps=12))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((model_dir / "summary.json").read_text())
    assert summary["resumed_from_step"] == 6 and summary["steps"] == 12
    assert all_finite(model_dir / "final.weights.h5")
