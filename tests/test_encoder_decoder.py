"""`EncoderLayer`, `DecoderLayer`, `Encoder` and `Decoder` equal NumPy compositions of the
paper's sub-layers (3.1: LayerNorm(x + Sublayer(x)), or pre-norm) computed from their own
weights; pre-norm differs from post-norm; dropout acts only in training."""

from __future__ import annotations

import numpy as np
import pytest

from keras_transformer.layers import Decoder, DecoderLayer, Encoder, EncoderLayer
from keras_transformer.testing.layer_inputs import (
    BATCH,
    D_FF,
    D_MODEL,
    HEADS,
    SRC_LEN,
    TGT_LEN,
    causal_mask,
    normal,
    padding_mask,
    randomize,
    to_np,
)
from keras_transformer.testing.numpy_reference import (
    np_decoder_layer,
    np_encoder_layer,
    np_layer_norm,
    np_sinusoids,
)


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
    self_mask = causal_mask(TGT_LEN)[None]
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
    self_mask = causal_mask(TGT_LEN)[None] & target_mask[:, None, :]  # (batch, tgt, tgt)
    h = x + np_sinusoids(TGT_LEN, D_MODEL)
    for layer in decoder.layers:
        h = np_decoder_layer(layer, h, memory, self_mask, memory_mask)
    got = decoder(x, memory, memory_mask=memory_mask, target_mask=target_mask)
    np.testing.assert_allclose(to_np(got), h, atol=2e-4, rtol=2e-4)
