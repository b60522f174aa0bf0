"""`ScaledDotProductAttention` and `MultiHeadAttention` equal NumPy versions of the paper's
equations (3.2.1, 3.2.2) computed from the layer's own weights; masked keys get exactly zero
weight; and multi-head attention with a growing, a fixed-size or a precomputed cross-attention
cache equals the full pass."""

from __future__ import annotations

import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import MultiHeadAttention, ScaledDotProductAttention
from keras_transformer.testing.layer_inputs import (
    BATCH,
    D_MODEL,
    HEADS,
    KEY_DIM,
    SRC_LEN,
    TGT_LEN,
    causal_mask,
    normal,
    padding_mask,
    randomize,
    to_np,
)
from keras_transformer.testing.numpy_reference import np_attention, np_mha

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
    mask = causal_mask(TGT_LEN)[None]  # (1, len, len)
    got, weights = mha(x, x, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(to_np(got), np_mha(mha, x, x, mask), atol=1e-4, rtol=1e-4)
    assert to_np(weights).shape == (BATCH, HEADS, TGT_LEN, TGT_LEN)
    assert np.all(to_np(weights)[..., ~causal_mask(TGT_LEN)] == 0.0)


def _full_causal_pass(rng, length: int):
    """A random-weight attention layer, an input `x` `(batch, length, d_model)` and the layer's
    full causal self-attention output for it."""
    mha = built_mha(rng)
    x = normal(rng, BATCH, length, D_MODEL)
    return mha, x, to_np(mha(x, x, attention_mask=causal_mask(length)[None]))


def _empty_cache(length: int) -> dict:
    """Zero keys and values `(batch, heads, length, key_dim)`."""
    zeros = np.zeros((BATCH, HEADS, length, KEY_DIM), "float32")
    return {"key": zeros, "value": zeros}


def _assert_cache_holds_projections(mha, x, cache) -> None:
    """The cache holds exactly the projected keys and values of the whole sequence `x`."""
    projected = mha.project_key_value(x)
    for name in ("key", "value"):
        np.testing.assert_allclose(to_np(cache[name]), to_np(projected[name]), atol=1e-6)


def test_multi_head_attention_growing_cache_equals_full_causal_pass(rng):
    length = 5
    mha, x, full = _full_causal_pass(rng, length)
    cache = _empty_cache(0)
    # Two tokens at once (causal among themselves), then one token per step.
    out, cache = mha(x[:, :2], x[:, :2], attention_mask=causal_mask(2)[None], cache=cache)
    np.testing.assert_allclose(to_np(out), full[:, :2], atol=1e-5)
    for t in range(2, length):
        out, cache = mha(x[:, t : t + 1], x[:, t : t + 1], cache=cache)
        assert tuple(cache["key"].shape) == (BATCH, HEADS, t + 1, KEY_DIM)
        np.testing.assert_allclose(to_np(out)[:, 0], full[:, t], atol=1e-5)
    _assert_cache_holds_projections(mha, x, cache)  # in position order


def test_multi_head_attention_fixed_cache_equals_full_causal_pass(rng):
    length = 5
    mha, x, full = _full_causal_pass(rng, length)
    cache = _empty_cache(length)
    for t in range(length):
        step_mask = causal_mask(length)[None, t : t + 1]  # (1, 1, length): keys <= t
        out, cache = mha(
            x[:, t : t + 1], x[:, t : t + 1], attention_mask=step_mask, cache=cache,
            cache_update_index=ops.convert_to_tensor(t),
        )  # fmt: skip
        assert tuple(cache["key"].shape) == (BATCH, HEADS, length, KEY_DIM)
        np.testing.assert_allclose(to_np(out)[:, 0], full[:, t], atol=1e-5)
    _assert_cache_holds_projections(mha, x, cache)  # of the whole sequence, filled


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
