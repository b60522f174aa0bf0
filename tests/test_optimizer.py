"""The training run's optimizer (`training.optimizer.GuardedAccumulatingAdam`) on finite
gradients: the paper's Adam, checked against a NumPy Adam and Keras' own, with Keras' Adam's
variables (a checkpoint of either loads into the other). Its skips and its accumulation:
`test_nonfinite.py`, `test_accumulation.py`."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.training.optimizer import GuardedAccumulatingAdam
from keras_transformer.training.schedule import TransformerSchedule

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.data run")


def numpy_adam(weights, grads_per_step, lrs, beta_1=0.9, beta_2=0.98, epsilon=1e-9):
    """The paper's Adam in NumPy (float64): the independent reference."""
    w = weights.astype("float64")
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, (g, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g * g
        m_hat, v_hat = m / (1 - beta_1**t), v / (1 - beta_2**t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + epsilon / np.sqrt(1 - beta_2**t))
    return w, m, v


def _run(optimizer_class, grads_per_step, start):
    variable = keras.Variable(start)
    optimizer = optimizer_class(TransformerSchedule(64, 10), 0.9, 0.98, 1e-9)
    for g in grads_per_step:
        optimizer.apply([tf.constant(g)], [variable])
    slots = [s.numpy() for s in optimizer.variables if s.shape == start.shape]
    return variable.numpy(), slots, optimizer


def test_finite_steps_are_keras_adam_and_numpy_adam():
    rng = np.random.default_rng(0)
    start = rng.normal(size=(7, 5)).astype("float32")
    grads = [rng.normal(scale=s, size=(7, 5)).astype("float32") for s in (1.0, 0.01, 100.0)]
    guarded, guarded_slots, optimizer = _run(GuardedAccumulatingAdam, grads, start)
    plain, plain_slots, _ = _run(keras.optimizers.Adam, grads, start)
    np.testing.assert_array_equal(guarded, plain)
    for a, b in zip(guarded_slots, plain_slots):
        np.testing.assert_array_equal(a, b)
    lrs = [float(TransformerSchedule(64, 10)(step)) for step in range(3)]
    reference, m, v = numpy_adam(start, grads, lrs)
    np.testing.assert_allclose(guarded, reference, rtol=0, atol=1e-5)
    np.testing.assert_allclose(guarded_slots[0], m, rtol=1e-5)  # the first moment
    np.testing.assert_allclose(guarded_slots[1], v, rtol=1e-5)  # the second moment
    assert int(optimizer.iterations.numpy()) == 3 and int(optimizer.nonfinite_steps) == 0
    assert np.abs(guarded - start).max() > 1e-3  # it did move


def test_sparse_gradients_are_summed_before_the_update_inside_tf_function():
    """An embedding lookup's IndexedSlices gradient (a repeated id too), in a traced step,
    against NumPy's Adam on the dense gradient 2 * count(id) * row of sum(rows ** 2): the
    optimizer densifies first, as the gradient is defined (Keras' sparse update squares the
    slices before summing repeated ids, so its second moment is off for row 3)."""
    keras.utils.set_random_seed(1)
    embedding = keras.layers.Embedding(11, 4)
    embedding.build((None,))
    start = embedding.embeddings.numpy().copy()
    optimizer = GuardedAccumulatingAdam(0.1, 0.9, 0.98, 1e-9)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(embedding(tf.constant([1, 3, 3])) ** 2)
        grads = tape.gradient(loss, embedding.trainable_variables)
        assert isinstance(grads[0], tf.IndexedSlices)
        optimizer.apply(grads, embedding.trainable_variables)

    count = np.bincount([1, 3, 3], minlength=11)[:, None].astype("float64")
    w, m, v = start.astype("float64"), 0.0, 0.0
    for t in (1, 2, 3):
        step()
        g = 2 * count * w
        m, v = 0.9 * m + 0.1 * g, 0.98 * v + 0.02 * g * g
        alpha = 0.1 * np.sqrt(1 - 0.98**t) / (1 - 0.9**t)
        w = w - alpha * m / (np.sqrt(v) + 1e-9)
    np.testing.assert_allclose(embedding.embeddings.numpy(), w, rtol=0, atol=1e-5)
    assert np.array_equal(embedding.embeddings.numpy()[2], start[2])  # id 2 was not looked up


@pytest.mark.parametrize("saved, loaded", [("keras", "guarded"), ("guarded", "keras")])
def test_a_weights_file_of_either_adam_loads_into_the_other(tmp_path, saved, loaded):
    """Model and optimizer state (moments, iterations) round-trip between Keras' Adam and the
    guarded one: checkpoints of earlier runs load, and so do ours into plain Keras."""
    adams = {"keras": keras.optimizers.Adam, "guarded": GuardedAccumulatingAdam}
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 3)).astype("float32"), rng.normal(size=(8, 1)).astype("float32")

    def model(name):
        keras.utils.set_random_seed(0)
        built = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        built.compile(adams[name](0.01, 0.9, 0.98, 1e-9), "mse")
        built.optimizer.build(built.trainable_variables)
        return built

    source, target = model(saved), model(loaded)
    source.train_on_batch(x, y)
    source.train_on_batch(x, y)
    path = str(tmp_path / "run.weights.h5")
    source.save_weights(path)
    target.load_weights(path)
    layouts = [[tuple(v.shape) for v in m.optimizer.variables] for m in (target, source)]
    assert layouts[0] == layouts[1] and len(layouts[0]) == 6  # step, rate, 2 x (m, v): Adam's
    for a, b in zip(target.optimizer.variables, source.optimizer.variables):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))
    for a, b in zip(target.get_weights(), source.get_weights()):
        np.testing.assert_array_equal(a, b)
