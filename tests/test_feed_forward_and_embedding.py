"""`PositionwiseFeedForward` equals FFN(x) = max(0, x W1 + b1) W2 + b2 (3.3), and
`SharedEmbedding` looks up and projects back with one matrix, scaled by sqrt(d_model) (3.4)."""

from __future__ import annotations

import math

import keras
import numpy as np

from keras_transformer.layers import PositionwiseFeedForward, SharedEmbedding
from keras_transformer.testing.layer_inputs import (
    BATCH,
    D_FF,
    D_MODEL,
    TGT_LEN,
    VOCAB,
    normal,
    randomize,
    to_np,
)


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


def test_shared_embedding_without_scale_returns_the_rows_unscaled(rng):
    layer = SharedEmbedding(vocab_size=VOCAB, d_model=D_MODEL, scale=False)
    ids = rng.integers(0, VOCAB, size=(BATCH, TGT_LEN)).astype("int32")
    vectors = to_np(layer(ids))
    np.testing.assert_array_equal(vectors, to_np(layer.embeddings)[ids])
