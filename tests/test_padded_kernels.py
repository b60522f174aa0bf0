"""Decoder weights padded once per search (`decoding.padded_kernels`): the same products as
Keras' `Dense` (checked against NumPy), the same production searches as with Keras' kernels,
padding only for large searches and wide layers, and the rule that the commands apply
(`onednn.padded_kernels_faster`, `KERAS_TRANSFORMER_PAD_KERNELS`)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import SearchOptions, TransformerConfig, build_transformer, onednn
from keras_transformer.decoding import padded_kernels
from keras_transformer.decoding.search import search_ids
from keras_transformer.tracing import graph_function


@pytest.mark.parametrize(("use_bias", "activation"), [(True, "relu"), (False, None)])
@pytest.mark.parametrize("pad", [padded_kernels.PAD, 0])
def test_dense_with_padded_weights_equals_numpy(use_bias, activation, pad):
    keras.utils.set_random_seed(0)
    layer = keras.layers.Dense(24, activation=activation, use_bias=use_bias)
    layer.build((None, 8))
    if use_bias:
        layer.bias.assign(np.random.default_rng(1).normal(size=24).astype("float32"))
    x = np.random.default_rng(2).normal(size=(2, 3, 8)).astype("float32")
    padded = padded_kernels.padded_kernel(layer, pad, min_units=1)
    got = np.asarray(padded_kernels.dense(layer, x, padded))
    want = x @ np.asarray(layer.kernel) + (np.asarray(layer.bias) if use_bias else 0.0)
    want = np.maximum(want, 0.0) if activation == "relu" else want
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got.shape == (2, 3, 24)


def test_padding_is_zero_and_the_rest_the_weights():
    layer = keras.layers.Dense(24)
    layer.build((None, 8))
    padded = padded_kernels.padded_kernel(layer, padded_kernels.PAD, min_units=1)
    kernel = np.asarray(padded["kernel"])
    assert kernel.shape == (8, 24 + padded_kernels.PAD)
    np.testing.assert_array_equal(kernel[:, :24], np.asarray(layer.kernel))
    assert not kernel[:, 24:].any() and not np.asarray(padded["bias"])[24:].any()


@pytest.mark.parametrize(("units", "padded"), [(256, False), (512, True)])
def test_only_layers_of_min_units_or_more_pad(units, padded):
    layer = keras.layers.Dense(units)
    layer.build((None, 4))
    width = padded_kernels.padded_kernel(layer)["kernel"].shape[1]
    assert width == units + (padded_kernels.PAD if padded else 0)


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(3)
    config = TransformerConfig.tiny(vocab_size=40, num_layers=2, dropout=0.0)  # d_ff 512
    return build_transformer(config)


@pytest.mark.parametrize("items", [3, 16])  # 12 rows: Keras' weights; 64 rows: padded
def test_the_production_search_is_the_same_with_padded_kernels(model, items):
    source = tf.constant(np.random.default_rng(items).integers(4, 40, size=(items, 6)), tf.int32)
    options = SearchOptions(beam_size=4, n_best=2, max_extra_length=6)
    plain_ids, plain_scores = search_ids(model, source, options, pad_kernels=False)
    ids, scores = graph_function(lambda s: search_ids(model, s, options, pad_kernels=True))(source)
    np.testing.assert_array_equal(ids.numpy(), plain_ids.numpy())
    np.testing.assert_allclose(scores.numpy(), plain_scores.numpy(), atol=1e-5)


@pytest.mark.parametrize(("rows", "padded"), [(63, False), (64, True)])
def test_only_searches_with_enough_rows_pad(model, rows, padded):
    kernels = padded_kernels.decoder_kernels(model, tf.constant(rows))
    inner = kernels[0]["feed_forward"]["inner"]["kernel"]  # d_ff 512: wide enough
    assert inner.shape[1] == 512 + (padded_kernels.PAD if padded else 0)
    np.testing.assert_array_equal(
        np.asarray(inner)[:, :512], np.asarray(model.decoder.layers[0].feed_forward.inner.kernel)
    )


@pytest.fixture
def cpu(monkeypatch):
    """An x86-64 CPU with oneDNN on, given flags and no ISA cap."""
    monkeypatch.setattr(onednn.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(onednn, "onednn_enabled", lambda: True)
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    return lambda flags: monkeypatch.setattr(onednn, "cpu_flags", lambda: set(flags))


def test_padded_on_avx2_only_cpus(cpu):
    cpu({"avx2", "fma"})
    assert onednn.padded_kernels_faster() is True
    cpu({"avx2", "fma", "avx512f", "avx512bw"})
    assert onednn.padded_kernels_faster() is False


@pytest.mark.parametrize(("cap", "want"), [("AVX2", True), ("avx2", True), ("AVX512_CORE", False)])
def test_an_isa_cap_counts_as_the_cpu(cpu, monkeypatch, cap, want):
    cpu({"avx2", "avx512f"})
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    assert onednn.padded_kernels_faster() is want


def test_keras_kernels_without_onednn_or_off_x86(cpu, monkeypatch):
    cpu({"avx2"})
    monkeypatch.setattr(onednn, "onednn_enabled", lambda: False)
    assert onednn.padded_kernels_faster() is False
    monkeypatch.setattr(onednn, "onednn_enabled", lambda: True)
    monkeypatch.setattr(onednn.platform, "machine", lambda: "aarch64")
    assert onednn.padded_kernels_faster() is False


@pytest.mark.parametrize(("value", "want"), [("1", True), ("0", False)])
def test_the_environment_overrides_the_cpu_rule(monkeypatch, value, want):
    monkeypatch.setattr(onednn, "padded_kernels_faster", lambda: not want)
    monkeypatch.setenv(padded_kernels.ENV_VAR, value)
    assert padded_kernels.default_pad_kernels() is want


def test_a_bad_environment_value_is_named(monkeypatch):
    monkeypatch.setenv(padded_kernels.ENV_VAR, "yes")
    with pytest.raises(ValueError, match="KERAS_TRANSFORMER_PAD_KERNELS must be 0 or 1.*'yes'"):
        padded_kernels.default_pad_kernels()
