"""FusedAdam (TensorFlow's ResourceApplyAdam kernel) against Keras' Adam and a NumPy Adam."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.testing.runs import printed_max_difference
from keras_transformer.training.fused_adam import FusedAdam
from keras_transformer.training.schedule import TransformerSchedule


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


def test_fused_adam_equals_keras_adam_and_numpy():
    rng = np.random.default_rng(0)
    start = rng.normal(size=(7, 5)).astype("float32")
    grads = [rng.normal(scale=s, size=(7, 5)).astype("float32") for s in (1.0, 0.01, 100.0)]
    fused, fused_slots, optimizer = _run(FusedAdam, grads, start)
    plain, plain_slots, _ = _run(keras.optimizers.Adam, grads, start)
    np.testing.assert_allclose(fused, plain, rtol=0, atol=1e-6)
    for a, b in zip(fused_slots, plain_slots):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-12)  # float32 roundoff
    lrs = [float(TransformerSchedule(64, 10)(step)) for step in range(3)]
    reference, m, v = numpy_adam(start, grads, lrs)
    np.testing.assert_allclose(fused, reference, rtol=0, atol=1e-5)
    np.testing.assert_allclose(fused_slots[0], m, rtol=1e-5)  # the first moment
    np.testing.assert_allclose(fused_slots[1], v, rtol=1e-5)  # the second moment
    assert int(optimizer.iterations.numpy()) == 3
    assert np.abs(fused - start).max() > 1e-3  # it did move


def test_fused_adam_takes_sparse_gradients_inside_tf_function():
    """An embedding lookup's IndexedSlices gradient (a repeated id too), in a traced step,
    against NumPy's Adam on the dense gradient 2 * count(id) * row of sum(rows ** 2). Keras'
    own Adam squares the slices before summing repeated ids, so its second moment is off for
    row 3; the fused update densifies first, as the gradient is defined."""
    keras.utils.set_random_seed(1)
    embedding = keras.layers.Embedding(11, 4)
    embedding.build((None,))
    start = embedding.embeddings.numpy().copy()
    optimizer = FusedAdam(0.1, 0.9, 0.98, 1e-9)

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


MIRRORED = """
from keras_transformer.training.trainer import configure_devices
configure_devices(2)
import numpy as np, tensorflow as tf, keras
from keras_transformer.testing.runs import printed_max_difference
from keras_transformer.training.fused_adam import FusedAdam
rng = np.random.default_rng(0)
x = rng.normal(size=(32, 3)).astype("float32"); y = rng.normal(size=(32, 1)).astype("float32")
weights = []
for strategy, optimizer in ((tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), FusedAdam),
                            (tf.distribute.get_strategy(), keras.optimizers.Adam)):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(optimizer(0.01), "mse")
    model.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    weights.append(np.concatenate([w.ravel() for w in model.get_weights()]))
print("max-difference", float(np.max(np.abs(weights[0] - weights[1]))))
"""


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow kernel")
def test_fused_adam_under_mirrored_strategy_equals_one_device_keras_adam():
    """2 CPU replicas of FusedAdam = Keras' Adam on one device (all-reduce order: 1e-6)."""
    assert 0 <= printed_max_difference(MIRRORED) <= 1e-6
