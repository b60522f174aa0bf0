"""`PositionalEncoding` equals the paper's sinusoids (3.5) and `LearnedPositionalEncoding`
adds its table; both continue from a `start_index` (cached decoding), a Python int or a tensor."""

from __future__ import annotations

import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import LearnedPositionalEncoding, PositionalEncoding
from keras_transformer.testing.layer_inputs import BATCH, D_MODEL, normal, to_np
from keras_transformer.testing.numpy_reference import np_sinusoids


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


def test_learned_positional_encoding_refuses_positions_past_its_table():
    layer = LearnedPositionalEncoding(max_length=8)
    with pytest.raises(ValueError, match="seq_len=6, start_index=4, max_length=8"):
        layer(np.zeros((1, 6, 4), "float32"), start_index=4)
