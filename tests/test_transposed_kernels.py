"""The XLA step's kernels read in `(out, in)` order (`incremental.fixed_shape_step(...,
transpose_kernels=True)`): the transposes are the kernels' (NumPy), the searches and samples
are the ones with Keras' kernels, under XLA and without it, and the rule the translator
applies (`incremental.transposed_kernels_pay`: d_model of 512 and more on an AVX2-only CPU,
XLA only, the variable overriding it)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import SearchOptions, TransformerConfig, build_transformer
from keras_transformer.decoding import incremental
from keras_transformer.decoding.search import sample_ids, search_ids
from keras_transformer.decoding.translator import Translator
from keras_transformer.tracing import graph_function


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(5)
    config = TransformerConfig.tiny(vocab_size=40, num_layers=2, dropout=0.0)
    return build_transformer(config)


def _sources(items: int) -> tf.Tensor:
    ids = np.random.default_rng(items).integers(4, 40, size=(items, 7))
    ids[:, -1] = 3  # EOS last
    ids[0, 3:] = [3, 0, 0, 0]  # a shorter source, right-padded
    return tf.constant(ids, tf.int32)


def test_transposed_kernels_are_each_decoder_dense_kernel_transposed(model):
    kernels = incremental.transposed_kernels(model)
    # per layer: self-attention q, k, v, output; cross-attention q, output (its keys and
    # values are projected once, before the loop); FFN 2
    assert len(kernels) == 8 * len(model.decoder.layers)
    for variable, transposed in kernels:
        np.testing.assert_array_equal(np.asarray(transposed), np.asarray(variable).T)


@pytest.mark.parametrize("jit_compile", [True, False])
def test_the_fixed_search_is_the_same_with_transposed_kernels(model, jit_compile):
    source = _sources(3)
    options = SearchOptions(beam_size=4, n_best=2, max_extra_length=6, padded_decode=True)

    def search(transpose):
        fn = graph_function(
            lambda s: search_ids(model, s, options, transpose_kernels=transpose),
            jit_compile=jit_compile,
        )
        return fn(source)

    plain_ids, plain_scores = search(False)
    ids, scores = search(True)
    np.testing.assert_array_equal(ids.numpy(), plain_ids.numpy())
    np.testing.assert_allclose(scores.numpy(), plain_scores.numpy(), atol=1e-5)
    assert (ids.numpy()[..., 0] > 3).any()  # searches that produce tokens, not only EOS


def test_xla_sampling_is_the_same_with_transposed_kernels(model):
    source = _sources(2)
    options = SearchOptions(max_extra_length=6, padded_decode=True)
    outputs = [
        graph_function(
            lambda s, t=transpose: sample_ids(
                model, s, options, "sample", top_k=5, seed=7, transpose_kernels=t
            ),
            jit_compile=True,
        )(source)
        for transpose in (False, True)
    ]
    np.testing.assert_array_equal(outputs[1][0].numpy(), outputs[0][0].numpy())
    np.testing.assert_allclose(outputs[1][1].numpy(), outputs[0][1].numpy(), atol=1e-5)


AVX2 = {"sse4_2", "avx", "avx2", "fma"}
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512_bf16"}


@pytest.mark.parametrize(
    ("d_model", "flags", "pays"),
    [
        (128, AVX2, False),
        (256, AVX2, False),
        (512, AVX2, True),
        (1024, AVX2, True),
        (512, AVX512, False),  # slower there (1.19-1.24x at base)
        (512, {"fp", "asimd"}, False),  # not x86: not measured
    ],
)
def test_the_rule_is_d_model_512_and_more_on_avx2_only_cpus(d_model, flags, pays, monkeypatch):
    monkeypatch.delenv(incremental.ENV_VAR, raising=False)

    assert incremental.transposed_kernels_pay(d_model, cpu_flags=flags) is pays


@pytest.mark.parametrize(("value", "pays"), [("1", True), ("0", False)])
def test_the_variable_overrides_the_rule(model, monkeypatch, value, pays):
    monkeypatch.setenv(incremental.ENV_VAR, value)
    assert incremental.transposed_kernels_pay(128, cpu_flags=AVX2) is pays
    padded = SearchOptions(padded_decode=True)
    assert Translator(model, None, padded, jit_compile=True).transpose_kernels is pays


def test_a_bad_variable_is_named(model, monkeypatch):
    monkeypatch.setenv(incremental.ENV_VAR, "yes")
    with pytest.raises(ValueError, match="KERAS_TRANSFORMER_TRANSPOSE_KERNELS.*'yes'"):
        incremental.transposed_kernels_pay(512)


def test_only_the_xla_translator_transposes(model, monkeypatch):
    monkeypatch.delenv(incremental.ENV_VAR, raising=False)
    padded = SearchOptions(padded_decode=True)
    assert not Translator(model, None, padded, jit_compile=True).transpose_kernels  # d_model 128
    assert Translator(
        model, None, padded, jit_compile=True, transpose_kernels=True
    ).transpose_kernels
    assert not Translator(model, None, padded, transpose_kernels=True).transpose_kernels  # no XLA
    monkeypatch.setattr(incremental, "transposed_kernels_pay", lambda d_model: True)
    assert Translator(model, None, padded, jit_compile=True).transpose_kernels  # the rule's
    assert not Translator(
        model, None, padded, jit_compile=True, transpose_kernels=False
    ).transpose_kernels  # the caller's word wins


def test_the_step_reads_its_kernels_through_the_transposed_copies(model, monkeypatch):
    # Copies scaled by 0.5 must change the search's scores: the equality above is not the
    # layers ignoring the copies.
    source = _sources(3)
    options = SearchOptions(beam_size=2, max_extra_length=4, padded_decode=True)
    plain = search_ids(model, source, options, transpose_kernels=True)[1]
    real = incremental.transposed_kernels
    monkeypatch.setattr(
        incremental, "transposed_kernels", lambda m: [(v, 0.5 * t) for v, t in real(m)]
    )
    scaled = search_ids(model, source, options, transpose_kernels=True)[1]
    assert np.abs(scaled.numpy() - plain.numpy()).max() > 1e-3


@pytest.mark.slow  # saves and loads an XLA search (about 30 s)
def test_a_saved_xla_search_with_transposed_kernels_gives_the_plain_search(
    model, tmp_path, monkeypatch
):
    options = SearchOptions(max_extra_length=6, padded_decode=True)
    translator = Translator(model, None, options, jit_compile=True, transpose_kernels=True)
    assert translator.transpose_kernels
    module = tf.Module()
    module.model, module.search = model, translator.search_function(1)
    tf.saved_model.save(module, str(tmp_path))
    source = _sources(4)
    loaded = tf.saved_model.load(str(tmp_path))  # kept: its variables live with it
    ids, scores = loaded.search(source)
    plain_ids, plain_scores = search_ids(model, source, options.replace(n_best=1))
    np.testing.assert_array_equal(ids.numpy(), plain_ids.numpy())
    np.testing.assert_allclose(scores.numpy(), plain_scores.numpy(), atol=1e-5)


def test_a_bfloat16_xla_search_is_the_same_with_transposed_kernels(model):
    """A bfloat16 model (the `--dtype bfloat16` export's): the copies keep the kernels' dtype
    and the XLA search with them gives the search without them (ids; scores, float32, to
    bfloat16's precision)."""
    bf16 = build_transformer(model.config, dtype="bfloat16")
    bf16.set_weights(model.get_weights())
    for variable, transposed in incremental.transposed_kernels(bf16):
        assert transposed.dtype == variable.dtype == "bfloat16"
    source = _sources(3)
    options = SearchOptions(beam_size=4, n_best=2, max_extra_length=6, padded_decode=True)
    found = [
        graph_function(
            lambda s, t=transpose: search_ids(bf16, s, options, transpose_kernels=t),
            jit_compile=True,
        )(source)
        for transpose in (False, True)
    ]
    np.testing.assert_array_equal(found[1][0].numpy(), found[0][0].numpy())
    assert found[1][1].dtype == tf.float32
    np.testing.assert_allclose(found[1][1].numpy(), found[0][1].numpy(), atol=2e-2)
    assert (found[1][0].numpy()[..., 0] > 3).any()
