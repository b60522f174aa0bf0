"""Every public layer passes `run_layer_test`, and its numbers equal NumPy versions of the
paper's formulas computed from the layer's own weights."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
from keras import ops
from layer_test_utils import run_layer_test

from keras_transformer.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LearnedPositionalEncoding,
    MultiHeadAttention,
    PositionalEncoding,
    PositionwiseFeedForward,
    ScaledDotProductAttention,
    SharedEmbedding,
)

BATCH, TGT_LEN, SRC_LEN, D_MODEL, HEADS, D_FF, VOCAB = 2, 4, 6, 16, 2, 32, 50
KEY_DIM = D_MODEL // HEADS
EPS = 1e-6


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def normal(rng, *shape):
    return rng.normal(size=shape).astype("float32")


def padding_mask(lengths, max_len):
    """Boolean `(batch, max_len)`, True for the first `lengths[b]` positions."""
    return np.arange(max_len)[None, :] < np.asarray(lengths)[:, None]


def np_causal(length):
    return np.tril(np.ones((length, length), bool))


def randomize(layer, rng, scale=0.3):
    """Random weights everywhere (biases, gamma and beta included) so the references see them."""
    layer.set_weights([rng.normal(scale=scale, size=w.shape) for w in layer.get_weights()])


def to_np(x):
    return keras.ops.convert_to_numpy(x)


# NumPy references ------------------------------------------------------------------------------


def np_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def np_attention(q, k, v, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V for (..., len, d) arrays; mask True = may attend."""
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = np_softmax(scores)
    return weights @ v, weights


def np_dense(dense, x):
    kernel = to_np(dense.kernel)
    return x @ kernel + (to_np(dense.bias) if dense.use_bias else 0.0)


def np_mha(layer, query, value, mask=None):
    """Concat(head_1..head_h) W_O with head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i).

    `mask` is `(batch, q_len, k_len)` or broadcastable; True = may attend.
    """
    dk, dv = layer.key_dim, layer.value_dim
    q_all = np_dense(layer.query_dense, query)  # (batch, q_len, h * d_k)
    k_all = np_dense(layer.key_dense, value)
    v_all = np_dense(layer.value_dense, value)
    heads = []
    for i in range(layer.num_heads):
        head, _ = np_attention(
            q_all[..., i * dk : (i + 1) * dk],
            k_all[..., i * dk : (i + 1) * dk],
            v_all[..., i * dv : (i + 1) * dv],
            mask,
        )
        heads.append(head)  # (batch, q_len, d_v)
    return np_dense(layer.output_dense, np.concatenate(heads, axis=-1))


def np_ffn(layer, x):
    return np_dense(layer.outer, np.maximum(0.0, np_dense(layer.inner, x)))


def np_layer_norm(norm, x):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + norm.epsilon) * to_np(norm.gamma) + to_np(norm.beta)


def np_residual(layer, x, sublayer, norm):
    """LayerNorm(x + Sublayer(x)) (post) or x + Sublayer(LayerNorm(x)) (pre); dropout 0."""
    if layer.norm_position == "post":
        return np_layer_norm(norm, x + sublayer(x))
    return x + sublayer(np_layer_norm(norm, x))


def np_encoder_layer(layer, x, mask=None):
    key_mask = None if mask is None else mask[:, None, :]  # (batch, 1, src_len)
    x = np_residual(
        layer, x, lambda h: np_mha(layer.self_attention, h, h, key_mask), layer.attention_norm
    )
    return np_residual(layer, x, lambda h: np_ffn(layer.feed_forward, h), layer.feed_forward_norm)


def np_decoder_layer(layer, x, memory, self_mask, memory_mask):
    cross_mask = memory_mask[:, None, :]  # (batch, 1, src_len)
    x = np_residual(
        layer, x, lambda h: np_mha(layer.self_attention, h, h, self_mask), layer.attention_norm
    )
    x = np_residual(
        layer,
        x,
        lambda h: np_mha(layer.cross_attention, h, memory, cross_mask),
        layer.cross_attention_norm,
    )
    return np_residual(layer, x, lambda h: np_ffn(layer.feed_forward, h), layer.feed_forward_norm)


def np_sinusoids(length, d_model, start=0):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    table = np.zeros((length, d_model))
    for pos in range(start, start + length):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            table[pos - start, 2 * i] = math.sin(angle)
            table[pos - start, 2 * i + 1] = math.cos(angle)
    return table


# run_layer_test for every public layer ---------------------------------------------------------


def test_scaled_dot_product_attention_layer(rng):
    q = normal(rng, BATCH, HEADS, TGT_LEN, KEY_DIM)
    k = normal(rng, BATCH, HEADS, SRC_LEN, KEY_DIM)
    v = normal(rng, BATCH, HEADS, SRC_LEN, 4)
    run_layer_test(
        ScaledDotProductAttention,
        init_kwargs={"dropout": 0.1},
        input_data=(q, k, v),
        expected_output_shape=((BATCH, HEADS, TGT_LEN, 4), (BATCH, HEADS, TGT_LEN, SRC_LEN)),
        expected_num_trainable_weights=0,
        run_training_check=False,
    )


@pytest.mark.parametrize("use_bias, num_weights", [(True, 8), (False, 4)])
def test_multi_head_attention_layer(rng, use_bias, num_weights):
    run_layer_test(
        MultiHeadAttention,
        init_kwargs={"num_heads": HEADS, "key_dim": KEY_DIM, "value_dim": 4, "use_bias": use_bias},
        input_data={
            "query": normal(rng, BATCH, TGT_LEN, D_MODEL),
            "value": normal(rng, BATCH, SRC_LEN, D_MODEL),
            "attention_mask": padding_mask([SRC_LEN, 3], SRC_LEN)[:, None, :],
        },
        expected_output_shape=(BATCH, TGT_LEN, D_MODEL),
        expected_num_trainable_weights=num_weights,
    )


def test_positional_encoding_layer(rng):
    run_layer_test(
        PositionalEncoding,
        init_kwargs={"max_wavelength": 10000.0},
        input_data=normal(rng, BATCH, TGT_LEN, D_MODEL),
        expected_output_shape=(BATCH, TGT_LEN, D_MODEL),
        expected_num_trainable_weights=0,
        run_training_check=False,
    )


def test_learned_positional_encoding_layer(rng):
    run_layer_test(
        LearnedPositionalEncoding,
        init_kwargs={"max_length": 10},
        input_data=normal(rng, BATCH, TGT_LEN, D_MODEL),
        expected_output_shape=(BATCH, TGT_LEN, D_MODEL),
        expected_num_trainable_weights=1,
    )


def test_positionwise_feed_forward_layer(rng):
    run_layer_test(
        PositionwiseFeedForward,
        init_kwargs={"d_ff": D_FF, "dropout": 0.0},
        input_data=normal(rng, BATCH, TGT_LEN, D_MODEL),
        expected_output_shape=(BATCH, TGT_LEN, D_MODEL),
        expected_num_trainable_weights=4,
    )


def test_shared_embedding_layer(rng):
    run_layer_test(
        SharedEmbedding,
        init_kwargs={"vocab_size": VOCAB, "d_model": D_MODEL},
        input_data=rng.integers(0, VOCAB, size=(BATCH, TGT_LEN)).astype("int32"),
        expected_output_shape=(BATCH, TGT_LEN, D_MODEL),
        expected_num_trainable_weights=1,
    )


def test_shared_embedding_layer_reverse(rng):
    run_layer_test(
        SharedEmbedding,
        init_kwargs={"vocab_size": VOCAB, "d_model": D_MODEL, "scale": False},
        input_data=normal(rng, BATCH, TGT_LEN, D_MODEL),
        call_kwargs={"reverse": True},
        expected_output_shape=(BATCH, TGT_LEN, VOCAB),
        expected_num_trainable_weights=1,
    )


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_encoder_layer_layer(rng, norm_position):
    run_layer_test(
        EncoderLayer,
        init_kwargs={
            "num_heads": HEADS,
            "d_ff": D_FF,
            "dropout": 0.0,
            "norm_position": norm_position,
        },
        input_data={
            "inputs": normal(rng, BATCH, SRC_LEN, D_MODEL),
            "padding_mask": padding_mask([SRC_LEN, 3], SRC_LEN),
        },
        expected_output_shape=(BATCH, SRC_LEN, D_MODEL),
        expected_num_trainable_weights=8 + 4 + 2 * 2,  # attention, FFN, two LayerNorms
    )


def test_decoder_layer_layer(rng):
    run_layer_test(
        DecoderLayer,
        init_kwargs={"num_heads": HEADS, "d_ff": D_FF, "dropout": 0.0},
        input_data={
            "inputs": normal(rng, BATCH, TGT_LEN, D_MODEL),
            "memory": normal(rng, BATCH, SRC_LEN, D_MODEL),
            "self_attention_mask": np.broadcast_to(np_causal(TGT_LEN), (BATCH, TGT_LEN, TGT_LEN)),
            "memory_mask": padding_mask([SRC_LEN, 3], SRC_LEN),
        },
        expected_output_shape=(BATCH, TGT_LEN, D_MODEL),
        expected_num_trainable_weights=2 * 8 + 4 + 3 * 2,  # two attentions, FFN, 3 LayerNorms
    )


@pytest.mark.parametrize(
    "positional_encoding, norm_position, num_weights",
    [("sinusoidal", "post", 2 * 16), ("learned", "pre", 2 * 16 + 1 + 2)],
)
def test_encoder_layer(rng, positional_encoding, norm_position, num_weights):
    run_layer_test(
        Encoder,
        init_kwargs={
            "num_layers": 2,
            "num_heads": HEADS,
            "d_ff": D_FF,
            "dropout": 0.0,
            "norm_position": norm_position,
            "positional_encoding": positional_encoding,
            "max_length": 12,
        },
        input_data={
            "inputs": normal(rng, BATCH, SRC_LEN, D_MODEL),
            "padding_mask": padding_mask([SRC_LEN, 3], SRC_LEN),
        },
        expected_output_shape=(BATCH, SRC_LEN, D_MODEL),
        expected_num_trainable_weights=num_weights,
    )


@pytest.mark.parametrize(
    "positional_encoding, norm_position, num_weights",
    [("sinusoidal", "post", 2 * 26), ("learned", "pre", 2 * 26 + 1 + 2)],
)
def test_decoder_layer(rng, positional_encoding, norm_position, num_weights):
    run_layer_test(
        Decoder,
        init_kwargs={
            "num_layers": 2,
            "num_heads": HEADS,
            "d_ff": D_FF,
            "dropout": 0.0,
            "norm_position": norm_position,
            "positional_encoding": positional_encoding,
            "max_length": 12,
        },
        input_data={
            "inputs": normal(rng, BATCH, TGT_LEN, D_MODEL),
            "memory": normal(rng, BATCH, SRC_LEN, D_MODEL),
            "memory_mask": padding_mask([SRC_LEN, 3], SRC_LEN),
            "target_mask": padding_mask([TGT_LEN, 2], TGT_LEN),
        },
        expected_output_shape=(BATCH, TGT_LEN, D_MODEL),
        expected_num_trainable_weights=num_weights,
    )


def test_every_public_layer_has_a_layer_test():
    import keras_transformer.layers as layers

    tested = {
        "Decoder",
        "DecoderLayer",
        "Encoder",
        "EncoderLayer",
        "LearnedPositionalEncoding",
        "MultiHeadAttention",
        "PositionalEncoding",
        "PositionwiseFeedForward",
        "ScaledDotProductAttention",
        "SharedEmbedding",
    }
    assert set(layers.__all__) == tested


@pytest.mark.parametrize("layer_cls", [EncoderLayer, DecoderLayer, Encoder, Decoder])
def test_symbolic_call_returns_attention_scores(layer_cls):
    kwargs = {"num_heads": HEADS, "d_ff": D_FF}
    if layer_cls in (Encoder, Decoder):
        kwargs["num_layers"] = 1
    args = [keras.Input(batch_shape=(BATCH, TGT_LEN, D_MODEL))]
    if layer_cls in (DecoderLayer, Decoder):
        args.append(keras.Input(batch_shape=(BATCH, SRC_LEN, D_MODEL)))
    eager = layer_cls(**kwargs)(*[np.zeros(a.shape, "float32") for a in args],
                                return_attention_scores=True)  # fmt: skip
    symbolic = layer_cls(**kwargs)(*args, return_attention_scores=True)
    assert isinstance(eager, tuple)
    assert isinstance(symbolic, tuple) and len(symbolic) == len(eager)


# Argument validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, bad",
    [
        (lambda: ScaledDotProductAttention(dropout=1.5), "1.5"),
        (lambda: MultiHeadAttention(num_heads=0, key_dim=8), "num_heads=0"),
        (lambda: MultiHeadAttention(num_heads=2, key_dim=-3), "key_dim=-3"),
        (lambda: PositionalEncoding(max_wavelength=0), "0"),
        (lambda: LearnedPositionalEncoding(max_length=0), "0"),
        (lambda: PositionwiseFeedForward(d_ff=0), "d_ff=0"),
        (lambda: SharedEmbedding(vocab_size=0, d_model=16), "vocab_size=0"),
        (lambda: EncoderLayer(num_heads=2, d_ff=32, norm_position="middle"), "middle"),
        (lambda: Encoder(num_layers=0, num_heads=2, d_ff=32), "0"),
        (lambda: Decoder(num_layers=1, num_heads=2, d_ff=32, positional_encoding="rope"), "rope"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_value(make, bad):
    with pytest.raises(ValueError, match="Received") as error:
        make()
    assert bad in str(error.value)


# ScaledDotProductAttention ---------------------------------------------------------------------


def test_scaled_dot_product_attention_matches_numpy(rng):
    q = normal(rng, BATCH, HEADS, TGT_LEN, KEY_DIM)
    k = normal(rng, BATCH, HEADS, SRC_LEN, KEY_DIM)
    v = normal(rng, BATCH, HEADS, SRC_LEN, 4)
    output, weights = ScaledDotProductAttention()(q, k, v)
    want_output, want_weights = np_attention(q, k, v)
    np.testing.assert_allclose(to_np(weights), want_weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_np(output), want_output, rtol=1e-5, atol=1e-5)
    assert to_np(weights).dtype == np.float32


def test_scaled_dot_product_attention_masked_keys_get_exactly_zero_weight(rng):
    q = normal(rng, BATCH, HEADS, TGT_LEN, KEY_DIM)
    k = normal(rng, BATCH, HEADS, SRC_LEN, KEY_DIM)
    v = normal(rng, BATCH, HEADS, SRC_LEN, 4)
    mask = rng.random((BATCH, HEADS, TGT_LEN, SRC_LEN)) < 0.5
    mask[..., 0] = True  # every query sees at least one key
    output, weights = ScaledDotProductAttention()(q, k, v, attention_mask=mask)
    weights = to_np(weights)
    assert np.all(weights[~mask] == 0.0)
    want_output, want_weights = np_attention(q, k, v, mask)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_np(output), want_output, rtol=1e-5, atol=1e-5)


def test_scaled_dot_product_attention_fully_masked_row_is_finite(rng):
    q = normal(rng, 1, 1, 3, KEY_DIM)
    k = normal(rng, 1, 1, 4, KEY_DIM)
    v = normal(rng, 1, 1, 4, KEY_DIM)
    mask = np.ones((1, 1, 3, 4), bool)
    mask[0, 0, 1] = False  # query 1 may attend to nothing
    output, weights = ScaledDotProductAttention()(q, k, v, attention_mask=mask)
    assert np.all(np.isfinite(to_np(output))) and np.all(np.isfinite(to_np(weights)))
    want_output, _ = np_attention(q[..., [0, 2], :], k, v)  # the other rows are unaffected
    np.testing.assert_allclose(to_np(output)[..., [0, 2], :], want_output, rtol=1e-5, atol=1e-5)


# MultiHeadAttention ----------------------------------------------------------------------------


def built_mha(rng, value_dim=None):
    mha = MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, value_dim=value_dim)
    mha(np.zeros((1, 2, D_MODEL), "float32"), np.zeros((1, 2, D_MODEL), "float32"))
    randomize(mha, rng)
    return mha


def test_multi_head_attention_matches_numpy_with_padding_mask(rng):
    mha = built_mha(rng, value_dim=4)
    query = normal(rng, BATCH, TGT_LEN, D_MODEL)
    value = normal(rng, BATCH, SRC_LEN, D_MODEL)
    mask = padding_mask([SRC_LEN, 3], SRC_LEN)[:, None, :]  # (batch, 1, src_len)
    got = mha(query, value, attention_mask=mask)
    np.testing.assert_allclose(to_np(got), np_mha(mha, query, value, mask), atol=1e-4, rtol=1e-4)


def test_multi_head_attention_matches_numpy_with_causal_mask(rng):
    mha = built_mha(rng)
    x = normal(rng, BATCH, TGT_LEN, D_MODEL)
    mask = np_causal(TGT_LEN)[None]  # (1, len, len)
    got, weights = mha(x, x, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(to_np(got), np_mha(mha, x, x, mask), atol=1e-4, rtol=1e-4)
    assert to_np(weights).shape == (BATCH, HEADS, TGT_LEN, TGT_LEN)
    assert np.all(to_np(weights)[..., ~np_causal(TGT_LEN)] == 0.0)


def test_multi_head_attention_growing_cache_equals_full_causal_pass(rng):
    mha = built_mha(rng)
    length = 5
    x = normal(rng, BATCH, length, D_MODEL)
    full = to_np(mha(x, x, attention_mask=np_causal(length)[None]))
    cache = {
        "key": np.zeros((BATCH, HEADS, 0, KEY_DIM), "float32"),
        "value": np.zeros((BATCH, HEADS, 0, KEY_DIM), "float32"),
    }
    # Two tokens at once (causal among themselves), then one token per step.
    out, cache = mha(x[:, :2], x[:, :2], attention_mask=np_causal(2)[None], cache=cache)
    np.testing.assert_allclose(to_np(out), full[:, :2], atol=1e-5)
    for t in range(2, length):
        out, cache = mha(x[:, t : t + 1], x[:, t : t + 1], cache=cache)
        assert tuple(cache["key"].shape) == (BATCH, HEADS, t + 1, KEY_DIM)
        np.testing.assert_allclose(to_np(out)[:, 0], full[:, t], atol=1e-5)
    # The cache holds the projected keys/values in position order.
    projected = mha.project_key_value(x)
    for name in ("key", "value"):
        np.testing.assert_allclose(to_np(cache[name]), to_np(projected[name]), atol=1e-6)


def test_multi_head_attention_fixed_cache_equals_full_causal_pass(rng):
    mha = built_mha(rng)
    length = 5
    x = normal(rng, BATCH, length, D_MODEL)
    full = to_np(mha(x, x, attention_mask=np_causal(length)[None]))
    cache = {
        "key": np.zeros((BATCH, HEADS, length, KEY_DIM), "float32"),
        "value": np.zeros((BATCH, HEADS, length, KEY_DIM), "float32"),
    }
    for t in range(length):
        step_mask = np_causal(length)[None, t : t + 1]  # (1, 1, length): keys <= t
        out, cache = mha(
            x[:, t : t + 1], x[:, t : t + 1], attention_mask=step_mask, cache=cache,
            cache_update_index=ops.convert_to_tensor(t),
        )  # fmt: skip
        assert tuple(cache["key"].shape) == (BATCH, HEADS, length, KEY_DIM)
        np.testing.assert_allclose(to_np(out)[:, 0], full[:, t], atol=1e-5)
    # The filled cache holds exactly the projected keys/values of the whole sequence.
    projected = mha.project_key_value(x)
    for name in ("key", "value"):
        np.testing.assert_allclose(to_np(cache[name]), to_np(projected[name]), atol=1e-6)


def test_multi_head_attention_precomputed_cross_cache_equals_direct_call(rng):
    mha = built_mha(rng)
    query = normal(rng, BATCH, TGT_LEN, D_MODEL)
    memory = normal(rng, BATCH, SRC_LEN, D_MODEL)
    mask = padding_mask([SRC_LEN, 3], SRC_LEN)[:, None, :]
    direct = mha(query, memory, attention_mask=mask)
    static = mha.project_key_value(memory)
    assert tuple(static["key"].shape) == (BATCH, HEADS, SRC_LEN, KEY_DIM)
    out, returned = mha(query, None, attention_mask=mask, cache=static)
    np.testing.assert_allclose(to_np(out), to_np(direct), atol=1e-6)
    for name in ("key", "value"):
        np.testing.assert_array_equal(to_np(returned[name]), to_np(static[name]))


def test_multi_head_attention_needs_value_or_cache():
    mha = MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM)
    with pytest.raises(ValueError, match="value"):
        mha(np.zeros((1, 2, D_MODEL), "float32"), None)


# Positional encodings --------------------------------------------------------------------------


def test_positional_encoding_matches_paper_formula():
    length = 50
    x = np.zeros((BATCH, length, D_MODEL), "float32")
    got = to_np(PositionalEncoding()(x))
    want = np_sinusoids(length, D_MODEL)
    assert got.shape == (BATCH, length, D_MODEL)
    np.testing.assert_allclose(got[0], want, atol=1e-4)
    np.testing.assert_array_equal(got[0], got[1])


@pytest.mark.parametrize("start", [0, 3, 17])
def test_positional_encoding_start_index_gives_later_rows(start):
    x = np.zeros((1, 4, D_MODEL), "float32")
    full = to_np(PositionalEncoding()(np.zeros((1, 30, D_MODEL), "float32")))[0]
    got = to_np(PositionalEncoding()(x, start_index=start))[0]
    np.testing.assert_allclose(got, full[start : start + 4], atol=1e-5)
    np.testing.assert_allclose(got, np_sinusoids(4, D_MODEL, start), atol=1e-4)
    as_tensor = to_np(PositionalEncoding()(x, start_index=ops.convert_to_tensor(start)))[0]
    np.testing.assert_allclose(as_tensor, got, atol=1e-6)


@pytest.mark.parametrize("start", [0, 3, 6])
def test_learned_positional_encoding_start_index_slices_table(rng, start):
    layer = LearnedPositionalEncoding(max_length=10)
    x = normal(rng, BATCH, 4, D_MODEL)
    layer(x)
    table = to_np(layer.position_embeddings)
    got = to_np(layer(x, start_index=start))
    np.testing.assert_array_equal(got, np.broadcast_to(table[start : start + 4], got.shape))
    as_tensor = to_np(layer(x, start_index=ops.convert_to_tensor(start)))
    np.testing.assert_array_equal(as_tensor, got)


# Feed-forward, embeddings ----------------------------------------------------------------------


def test_positionwise_feed_forward_matches_numpy(rng):
    layer = PositionwiseFeedForward(d_ff=D_FF)
    x = normal(rng, BATCH, TGT_LEN, D_MODEL)
    layer(x)
    randomize(layer, rng)
    w1, b1 = to_np(layer.inner.kernel), to_np(layer.inner.bias)
    w2, b2 = to_np(layer.outer.kernel), to_np(layer.outer.bias)
    assert w1.shape == (D_MODEL, D_FF) and w2.shape == (D_FF, D_MODEL)
    want = np.maximum(0.0, x @ w1 + b1) @ w2 + b2
    np.testing.assert_allclose(to_np(layer(x)), want, atol=1e-5, rtol=1e-5)


def test_shared_embedding_lookup_and_reverse_use_one_matrix(rng):
    layer = SharedEmbedding(vocab_size=VOCAB, d_model=D_MODEL)
    ids = rng.integers(0, VOCAB, size=(BATCH, TGT_LEN)).astype("int32")
    vectors = to_np(layer(ids))
    assert len(layer.weights) == 1
    table = to_np(layer.embeddings)
    assert table.shape == (VOCAB, D_MODEL)
    np.testing.assert_allclose(vectors, table[ids] * math.sqrt(D_MODEL), rtol=1e-6)
    hidden = normal(rng, BATCH, TGT_LEN, D_MODEL)
    logits = layer(hidden, reverse=True)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    np.testing.assert_allclose(to_np(logits), hidden @ table.T, atol=1e-5, rtol=1e-5)
    assert len(layer.weights) == 1


def test_shared_embedding_without_scale(rng):
    layer = SharedEmbedding(vocab_size=VOCAB, d_model=D_MODEL, scale=False)
    ids = rng.integers(0, VOCAB, size=(BATCH, TGT_LEN)).astype("int32")
    vectors = to_np(layer(ids))
    np.testing.assert_array_equal(vectors, to_np(layer.embeddings)[ids])


# Encoder and decoder layers --------------------------------------------------------------------


def built_encoder_layer(rng, norm_position, x):
    layer = EncoderLayer(num_heads=HEADS, d_ff=D_FF, dropout=0.0, norm_position=norm_position)
    layer(x)
    randomize(layer, rng)
    return layer


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_encoder_layer_matches_numpy(rng, norm_position):
    x = normal(rng, BATCH, SRC_LEN, D_MODEL)
    mask = padding_mask([SRC_LEN, 3], SRC_LEN)
    layer = built_encoder_layer(rng, norm_position, x)
    got = to_np(layer(x, padding_mask=mask))
    np.testing.assert_allclose(got, np_encoder_layer(layer, x, mask), atol=1e-4, rtol=1e-4)


def test_pre_norm_encoder_layer_differs_from_post_norm(rng):
    x = normal(rng, BATCH, SRC_LEN, D_MODEL)
    post = built_encoder_layer(rng, "post", x)
    pre = EncoderLayer(num_heads=HEADS, d_ff=D_FF, dropout=0.0, norm_position="pre")
    pre(x)
    pre.set_weights(post.get_weights())
    got_post, got_pre = to_np(post(x)), to_np(pre(x))
    assert np.all(np.isfinite(got_pre))
    assert np.abs(got_post - got_pre).max() > 1e-2


def test_encoder_layer_dropout_only_in_training(rng):
    x = normal(rng, BATCH, SRC_LEN, D_MODEL)
    layer = EncoderLayer(num_heads=HEADS, d_ff=D_FF, dropout=0.5)
    inference = to_np(layer(x))
    np.testing.assert_array_equal(to_np(layer(x, training=False)), inference)
    assert np.abs(to_np(layer(x, training=True)) - inference).max() > 1e-3


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_decoder_layer_matches_numpy(rng, norm_position):
    x = normal(rng, BATCH, TGT_LEN, D_MODEL)
    memory = normal(rng, BATCH, SRC_LEN, D_MODEL)
    memory_mask = padding_mask([SRC_LEN, 3], SRC_LEN)
    self_mask = np_causal(TGT_LEN)[None]
    layer = DecoderLayer(num_heads=HEADS, d_ff=D_FF, dropout=0.0, norm_position=norm_position)
    layer(x, memory)
    randomize(layer, rng)
    got, weights = layer(
        x, memory, self_attention_mask=self_mask, memory_mask=memory_mask,
        return_attention_scores=True,
    )  # fmt: skip
    want = np_decoder_layer(layer, x, memory, self_mask, memory_mask)
    np.testing.assert_allclose(to_np(got), want, atol=1e-4, rtol=1e-4)
    assert to_np(weights).shape == (BATCH, HEADS, TGT_LEN, SRC_LEN)
    assert np.all(to_np(weights)[1, :, :, 3:] == 0.0)  # padded source keys


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_encoder_matches_numpy_composition(rng, norm_position):
    x = normal(rng, BATCH, SRC_LEN, D_MODEL)
    mask = padding_mask([SRC_LEN, 3], SRC_LEN)
    encoder = Encoder(
        num_layers=2, num_heads=HEADS, d_ff=D_FF, dropout=0.0, norm_position=norm_position
    )
    encoder(x)
    randomize(encoder, rng)
    h = x + np_sinusoids(SRC_LEN, D_MODEL)
    for layer in encoder.layers:
        h = np_encoder_layer(layer, h, mask)
    if norm_position == "pre":
        h = np_layer_norm(encoder.final_norm, h)
    else:
        assert encoder.final_norm is None
    got = to_np(encoder(x, padding_mask=mask))
    np.testing.assert_allclose(got, h, atol=2e-4, rtol=2e-4)


def test_decoder_matches_numpy_composition(rng):
    x = normal(rng, BATCH, TGT_LEN, D_MODEL)
    memory = normal(rng, BATCH, SRC_LEN, D_MODEL)
    memory_mask = padding_mask([SRC_LEN, 3], SRC_LEN)
    target_mask = padding_mask([TGT_LEN, 2], TGT_LEN)
    decoder = Decoder(num_layers=2, num_heads=HEADS, d_ff=D_FF, dropout=0.0)
    decoder(x, memory)
    randomize(decoder, rng)
    self_mask = np_causal(TGT_LEN)[None] & target_mask[:, None, :]  # (batch, tgt, tgt)
    h = x + np_sinusoids(TGT_LEN, D_MODEL)
    for layer in decoder.layers:
        h = np_decoder_layer(layer, h, memory, self_mask, memory_mask)
    got = decoder(x, memory, memory_mask=memory_mask, target_mask=target_mask)
    np.testing.assert_allclose(to_np(got), h, atol=2e-4, rtol=2e-4)


def test_learned_positional_encoding_refuses_positions_past_its_table():
    layer = LearnedPositionalEncoding(max_length=8)
    with pytest.raises(ValueError, match="seq_len=6, start_index=4, max_length=8"):
        layer(np.zeros((1, 6, 4), "float32"), start_index=4)
