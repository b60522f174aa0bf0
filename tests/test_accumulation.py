"""Gradient accumulation (`--accumulate-steps K`): K micro-batches make the same update as one
K-times-larger batch, the learning-rate schedule and Adam's bias correction count updates, and a
non-finite micro-batch adds nothing to its update.

Tolerance: the two runs differ only in float32 summation order (the accumulated mean of K batch
means vs one mean over K times the tokens). Adam's moments agree within rtol 1e-4 + atol 1e-8
and the weights within atol 2e-6 (measured: 6e-7) after two updates at learning rates of
0.03-0.06, except the attention key biases: their gradient is zero in exact arithmetic (a
softmax ignores a constant added to a row of logits), so both runs hold only roundoff (~1e-10)
there, which Adam's per-element scaling turns into moves of a random fraction of the rate.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from keras_transformer.config import TrainingConfig, TransformerConfig

VOCAB = 40
K = 3


def paper_rate(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("value", [0, -2, 1.5])
def test_bad_accumulate_steps_is_named(value):
    from keras_transformer.training.optimizer import GuardedAccumulatingAdam

    with pytest.raises(ValueError, match=f"accumulate_steps={value!r}"):
        TrainingConfig.from_flat(accumulate_steps=value)
    with pytest.raises(ValueError, match="accumulate_steps"):
        GuardedAccumulatingAdam(accumulate_steps=value)
    # float16 accumulates unscaled gradients (tests/test_loss_scaling.py): no longer refused.
    cfg = TrainingConfig.from_flat(accumulate_steps=2, mixed_precision="mixed_float16")
    assert (cfg.recipe.accumulate_steps, cfg.distribution.mixed_precision) == (2, "mixed_float16")


def _model(accumulate):
    import keras

    from keras_transformer import build_transformer
    from keras_transformer.training.trainer import compile_model

    keras.utils.set_random_seed(3)
    config = TransformerConfig.tiny(
        VOCAB, num_layers=1, d_model=16, d_ff=32, num_heads=2, dropout=0.0, max_length=16
    )
    model = build_transformer(config)
    cfg = TrainingConfig.from_flat(warmup_steps=4, accumulate_steps=accumulate)
    compile_model(model, config, cfg)
    return model


def _batches(count, rows=4, length=7, seed=0):
    """`count` micro-batches without padding: every one holds rows x length target tokens, so
    the mean of their token means is the mean over all their tokens."""
    rng = np.random.default_rng(seed)

    def ids():
        return rng.integers(4, VOCAB, size=(rows, length)).astype("int32")

    return [({"source": ids(), "target": ids()}, ids()) for _ in range(count)]


def _concat(batches):
    return (
        {k: np.concatenate([b[0][k] for b in batches]) for k in ("source", "target")},
        np.concatenate([b[1] for b in batches]),
    )


def test_k_micro_batches_equal_one_k_times_larger_batch():
    micro = _batches(2 * K)
    accumulating, plain = _model(K), _model(1)
    for a, b in zip(accumulating.get_weights(), plain.get_weights()):
        np.testing.assert_array_equal(a, b)
    rates = []
    for i, (x, y) in enumerate(micro):
        rates.append(float(accumulating.optimizer.learning_rate))
        accumulating.train_on_batch(x, y)
        assert int(accumulating.optimizer.iterations) == (i + 1) // K
        assert int(accumulating.optimizer.accumulated_micro_batches) == (i + 1) % K
    for update in range(2):
        plain.train_on_batch(*_concat(micro[update * K : (update + 1) * K]))
    assert int(plain.optimizer.iterations) == 2
    # Every micro-batch of update u used the rate of step u + 1.
    np.testing.assert_allclose(rates, [paper_rate(i // K + 1, 16, 4) for i in range(2 * K)])
    moved = max(
        float(np.max(np.abs(a - b))) for a, b in zip(plain.get_weights(), _model(1).get_weights())
    )
    assert moved > 1e-3  # the updates did something
    for a, b in zip(accumulating.weights, plain.weights):
        if not a.path.endswith("key/bias"):
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-6, rtol=0, err_msg=a.path)
    moments = {_name(v): v.numpy() for v in plain.optimizer.variables if _is_moment(v)}
    compared = 0
    for variable in accumulating.optimizer.variables:
        if _is_moment(variable):
            expected = moments[_name(variable)]
            np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-4, atol=1e-8)
            compared += 1
    assert compared == len(moments) > 0


def _name(variable):
    return variable.path.split("/", 1)[-1]  # without the optimizer's own name


def _is_moment(variable):
    return variable.path.endswith(("_momentum", "_velocity"))


def test_nonfinite_micro_batch_adds_nothing_to_its_update():
    """K=2, the second micro-batch holds a NaN: the update is the first micro-batch's gradient
    over 2 (as if the second had a zero gradient), counted once in `nonfinite_steps`; the next
    update trains normally. The reference's second micro-batch is a zero gradient."""
    import keras

    from keras_transformer.training.optimizer import GuardedAccumulatingAdam

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 8, 3)).astype("float32")
    y = rng.normal(size=(4, 8, 1)).astype("float32")
    poisoned = x.copy()
    poisoned[1, 5, 0] = np.nan

    def dense():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(GuardedAccumulatingAdam(0.1, accumulate_steps=2), "mse")
        return model

    model, reference = dense(), dense()
    model.train_on_batch(poisoned[0], y[0])
    model.train_on_batch(poisoned[1], y[1])
    reference.train_on_batch(x[0], y[0])
    zeros = [keras.ops.zeros_like(v) for v in reference.trainable_variables]
    reference.optimizer.apply(zeros, reference.trainable_variables)
    assert int(model.optimizer.nonfinite_steps) == 1 and int(model.optimizer.iterations) == 1
    for a, b in zip(model.get_weights(), reference.get_weights()):
        assert np.isfinite(a).all()
        np.testing.assert_array_equal(a, b)
    before = model.get_weights()[0].copy()
    model.train_on_batch(x[2], y[2])
    model.train_on_batch(x[3], y[3])
    assert int(model.optimizer.iterations) == 2 and not np.array_equal(
        before, model.get_weights()[0]
    )


MIRRORED = """
from keras_transformer.training.trainer import configure_devices
configure_devices(2)
import numpy as np, tensorflow as tf, keras
from keras_transformer.training.optimizer import GuardedAccumulatingAdam
rng = np.random.default_rng(0)
x = rng.normal(size=(32, 3)).astype("float32"); y = rng.normal(size=(32, 1)).astype("float32")
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
weights = []
for steps, batch in ((2, 8), (1, 16)):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(GuardedAccumulatingAdam(0.01, accumulate_steps=steps) if steps > 1
                      else GuardedAccumulatingAdam(0.01), "mse")
    model.fit(x, y, batch_size=batch, shuffle=False, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 2, model.optimizer.iterations
    weights.append(np.concatenate([w.ravel() for w in model.get_weights()]))
print("max-difference", float(np.max(np.abs(weights[0] - weights[1]))))
"""


def test_two_replicas_accumulate_like_one_device():
    """MirroredStrategy over 2 CPU devices: 2 micro-batches of 8 rows (4 per replica) per update
    equal one 16-row batch per update (tolerance 1e-6: summation order only)."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", MIRRORED], capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    difference = float(result.stdout.split("max-difference")[-1])
    assert difference <= 1e-6
