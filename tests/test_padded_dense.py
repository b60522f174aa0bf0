"""Decoder kernels padded once per search (`layers.padded_dense`, `incremental.PAD_KERNELS`):
the same products as Keras' `Dense` (checked against NumPy), the same searches as with
Keras' kernels, padding only for large batches, and the CPU rule that turns it on
(`onednn.padded_kernels_faster`)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import SearchOptions, TransformerConfig, build_transformer, onednn
from keras_transformer.decoding import BeamSearch, LoopOptions, Sampling, decode, incremental
from keras_transformer.layers import padded_dense

VOCAB, ITEMS, SRC_LEN = 40, 3, 6


@pytest.fixture
def any_width(monkeypatch):
    """Pad layers of any width (`padded_dense.MIN_UNITS`), so that small ones pad."""
    monkeypatch.setattr(padded_dense, "MIN_UNITS", 1)


@pytest.mark.parametrize(("use_bias", "activation"), [(True, "relu"), (False, None)])
@pytest.mark.parametrize("pad", [padded_dense.PAD, 0])
def test_apply_equals_numpy_dense(any_width, use_bias, activation, pad):
    layer = keras.layers.Dense(6, use_bias=use_bias, activation=activation)
    x = np.random.default_rng(0).normal(size=(2, 3, 5)).astype("float32")
    layer.build(x.shape)
    if use_bias:
        layer.bias.assign(np.linspace(-1, 1, 6).astype("float32"))
    padded = padded_dense.padded_kernel(layer, pad)
    assert tuple(padded["kernel"].shape) == (5, 6 + pad)
    assert ("bias" in padded) == use_bias
    got = np.asarray(padded_dense.apply(layer, tf.constant(x), padded))
    want = x @ np.asarray(layer.kernel) + (np.asarray(layer.bias) if use_bias else 0.0)
    want = np.maximum(want, 0.0) if activation == "relu" else want
    assert got.shape == (2, 3, 6)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(np.asarray(padded_dense.apply(layer, x)), want, atol=1e-5)


def test_padding_is_zero_and_the_rest_the_weights(any_width):
    layer = keras.layers.Dense(4)
    layer.build((None, 3))
    layer.bias.assign(np.arange(1, 5, dtype="float32"))
    padded = padded_dense.padded_kernel(layer, 2)
    kernel, bias = np.asarray(padded["kernel"]), np.asarray(padded["bias"])
    np.testing.assert_array_equal(kernel[:, :4], np.asarray(layer.kernel))
    np.testing.assert_array_equal(kernel[:, 4:], 0.0)
    np.testing.assert_array_equal(bias, [1, 2, 3, 4, 0, 0])


@pytest.mark.parametrize(("units", "padded"), [(256, False), (512, True)])
def test_only_layers_of_min_units_or_more_pad(units, padded):
    layer = keras.layers.Dense(units)
    layer.build((None, 8))
    width = padded_dense.padded_kernel(layer)["kernel"].shape[-1]
    assert width == units + (padded_dense.PAD if padded else 0)


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(5)
    return build_transformer(TransformerConfig.tiny(VOCAB, num_layers=1, dropout=0.0))


@pytest.fixture
def layout(monkeypatch, any_width):
    """Fix `incremental.PAD_KERNELS` (read while a search is traced) and pad from 1 row on,
    so that these small searches and layers pad."""
    monkeypatch.setattr(incremental, "PAD_MIN_ROWS", 1)
    yield lambda padded: setattr(incremental, "PAD_KERNELS", padded)
    incremental.PAD_KERNELS = None


def _search(model, strategy, cache: str):
    rng = np.random.default_rng(2)
    ids = rng.integers(4, VOCAB, (ITEMS, SRC_LEN)).astype("int32")
    ids[2, 3:] = 0  # padding: the memory mask matters
    loop = LoopOptions(padded=cache == "padded")

    @tf.function
    def run(source):
        memory, mask = model.encode(source)
        bos = tf.fill([ITEMS], model.config.bos_id)
        if cache == "slots":
            step = incremental.per_item_decoder(model, memory, mask, strategy.rows_per_item)
            return decode(strategy, step.fn, bos, step.cache, 10, loop, shared=step.shared,
                          reorder_cache=step.reorder_cache)  # fmt: skip
        fn, state, shared = incremental.incremental_decoder_with_shared(
            model, memory, mask, 10 if cache == "padded" else None, strategy.rows_per_item
        )
        return decode(strategy, fn, bos, state, 10, loop, shared=shared)

    found, scores = run(tf.constant(ids))
    return np.asarray(found), np.asarray(scores)


# The per-source cache is what `Translator` searches with; the row caches: the design before
# it, and XLA's layout ("padded").
@pytest.mark.parametrize("cache", ["slots", "rows", "padded"])
def test_beam_search_is_the_same_with_padded_kernels(model, layout, cache):
    strategy = BeamSearch(VOCAB, SearchOptions(beam_size=3, n_best=2))
    layout(False)
    want_ids, want_scores = _search(model, strategy, cache)
    layout(True)
    ids, scores = _search(model, strategy, cache)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(scores, want_scores, atol=1e-4)


def test_greedy_is_the_same_with_padded_kernels(model, layout):
    layout(False)
    want = _search(model, Sampling(), "slots")
    layout(True)
    got = _search(model, Sampling(), "slots")
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], atol=1e-4)


@pytest.mark.parametrize(("rows", "pad"), [(63, 0), (64, padded_dense.PAD)])
def test_only_searches_with_enough_rows_pad(model, layout, rows, pad):
    layout(True)
    incremental.PAD_MIN_ROWS = 64  # restored by the fixture's monkeypatch
    kernels = incremental._layer_kernels(model, tf.constant(rows))
    d_ff = model.decoder.layers[0].feed_forward.d_ff
    assert kernels[0]["feed_forward"]["inner"]["kernel"].shape[-1] == d_ff + pad


def test_padded_decode_never_pads(model, layout, monkeypatch):
    """XLA's layout (`max_decode_length` buffers, static shapes): no `tf.cond` between
    kernels of two widths, so no padding at all."""
    layout(True)

    def refuse(*args):
        raise AssertionError("padded decoding asked for padded kernels")

    monkeypatch.setattr(incremental, "_layer_kernels", refuse)
    memory, mask = model.encode(tf.fill([2, 4], 5))
    incremental.incremental_decoder_with_shared(model, memory, mask, 6, 4)
    with pytest.raises(AssertionError, match="asked for padded"):
        incremental.incremental_decoder_with_shared(model, memory, mask, None, 4)


def test_decoder_layer_kernels_are_its_weights(model):
    layer = model.decoder.layers[0]
    kernels = layer.kernels()
    assert set(kernels) == {"self_attention", "cross_attention", "feed_forward"}
    assert set(kernels["cross_attention"]) == {"query", "output"}
    inner = np.asarray(kernels["feed_forward"]["inner"]["kernel"])
    np.testing.assert_array_equal(
        inner[:, : layer.d_ff], np.asarray(layer.feed_forward.inner.kernel)
    )
    query = np.asarray(layer.kernels(pad=0)["self_attention"]["query"]["kernel"])
    np.testing.assert_array_equal(query, np.asarray(layer.self_attention.query_dense.kernel))


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


def test_the_older_dnnl_cap_counts_unless_onednn_names_another(cpu, monkeypatch):
    cpu({"avx2", "avx512f"})
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX2")
    assert onednn.padded_kernels_faster() is True
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE")
    assert onednn.padded_kernels_faster() is False


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
    monkeypatch.setenv(incremental.PAD_KERNELS_ENV, value)
    assert incremental.pad_kernels() is want


def test_a_bad_environment_value_is_named(monkeypatch):
    monkeypatch.setenv(incremental.PAD_KERNELS_ENV, "yes")
    with pytest.raises(ValueError, match="KERAS_TRANSFORMER_PAD_KERNELS must be 0 or 1.*'yes'"):
        incremental.pad_kernels()
