"""Every public layer passes the shared layer test (`run_layer_test`: config round trip, eager
and symbolic calls, weight counts, `.keras` saving, one fit step), returns attention scores
when called symbolically, and refuses bad arguments naming the value.

The numbers of each layer are checked against NumPy references in test_attention.py,
test_positional_encoding.py, test_feed_forward_and_embedding.py and test_encoder_decoder.py.
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np
import pytest

from keras_transformer import layers
from keras_transformer.testing.layer_inputs import (
    BATCH,
    D_FF,
    D_MODEL,
    HEADS,
    KEY_DIM,
    SRC_LEN,
    TGT_LEN,
    VOCAB,
    causal_mask,
    normal,
    padding_mask,
)
from keras_transformer.testing.layer_test import run_layer_test


def _case(
    case_id: str,
    layer_cls: type,
    init_kwargs: dict,
    inputs: Callable[[np.random.Generator], object],
    output_shape: tuple,
    num_weights: int,
    **options,
):
    """One `run_layer_test` call; `inputs(rng)` makes its `input_data`, `options` the rest."""
    return pytest.param(layer_cls, init_kwargs, inputs, output_shape, num_weights, options,
                        id=case_id)  # fmt: skip


def _encoder_inputs(rng):
    return {
        "inputs": normal(rng, BATCH, SRC_LEN, D_MODEL),
        "padding_mask": padding_mask([SRC_LEN, 3], SRC_LEN),
    }


def _stack_kwargs(norm_position: str, positional_encoding: str) -> dict:
    """Arguments of a two-layer `Encoder` or `Decoder`."""
    return {
        "num_layers": 2, "num_heads": HEADS, "d_ff": D_FF, "dropout": 0.0,
        "norm_position": norm_position, "positional_encoding": positional_encoding,
        "max_length": 12,
    }  # fmt: skip


def _decoder_stack_inputs(rng):
    return {
        "inputs": normal(rng, BATCH, TGT_LEN, D_MODEL),
        "memory": normal(rng, BATCH, SRC_LEN, D_MODEL),
        "memory_mask": padding_mask([SRC_LEN, 3], SRC_LEN),
        "target_mask": padding_mask([TGT_LEN, 2], TGT_LEN),
    }


LAYER_CASES = [
    _case(
        "scaled_dot_product_attention",
        layers.ScaledDotProductAttention,
        {"dropout": 0.1},
        lambda rng: (
            normal(rng, BATCH, HEADS, TGT_LEN, KEY_DIM),
            normal(rng, BATCH, HEADS, SRC_LEN, KEY_DIM),
            normal(rng, BATCH, HEADS, SRC_LEN, 4),
        ),
        ((BATCH, HEADS, TGT_LEN, 4), (BATCH, HEADS, TGT_LEN, SRC_LEN)),
        0,
        run_training_check=False,
    ),
    *[
        _case(
            f"multi_head_attention_{'with' if use_bias else 'without'}_bias",
            layers.MultiHeadAttention,
            {"num_heads": HEADS, "key_dim": KEY_DIM, "value_dim": 4, "use_bias": use_bias},
            lambda rng: {
                "query": normal(rng, BATCH, TGT_LEN, D_MODEL),
                "value": normal(rng, BATCH, SRC_LEN, D_MODEL),
                "attention_mask": padding_mask([SRC_LEN, 3], SRC_LEN)[:, None, :],
            },
            (BATCH, TGT_LEN, D_MODEL),
            num_weights,
        )
        for use_bias, num_weights in [(True, 8), (False, 4)]
    ],
    _case(
        "positional_encoding",
        layers.PositionalEncoding,
        {"max_wavelength": 10000.0},
        lambda rng: normal(rng, BATCH, TGT_LEN, D_MODEL),
        (BATCH, TGT_LEN, D_MODEL),
        0,
        run_training_check=False,
    ),
    _case(
        "learned_positional_encoding",
        layers.LearnedPositionalEncoding,
        {"max_length": 10},
        lambda rng: normal(rng, BATCH, TGT_LEN, D_MODEL),
        (BATCH, TGT_LEN, D_MODEL),
        1,
    ),
    _case(
        "positionwise_feed_forward",
        layers.PositionwiseFeedForward,
        {"d_ff": D_FF, "dropout": 0.0},
        lambda rng: normal(rng, BATCH, TGT_LEN, D_MODEL),
        (BATCH, TGT_LEN, D_MODEL),
        4,
    ),
    _case(
        "shared_embedding",
        layers.SharedEmbedding,
        {"vocab_size": VOCAB, "d_model": D_MODEL},
        lambda rng: rng.integers(0, VOCAB, size=(BATCH, TGT_LEN)).astype("int32"),
        (BATCH, TGT_LEN, D_MODEL),
        1,
    ),
    _case(
        "shared_embedding_reverse",
        layers.SharedEmbedding,
        {"vocab_size": VOCAB, "d_model": D_MODEL, "scale": False},
        lambda rng: normal(rng, BATCH, TGT_LEN, D_MODEL),
        (BATCH, TGT_LEN, VOCAB),
        1,
        call_kwargs={"reverse": True},
    ),
    *[
        _case(
            f"encoder_layer_{norm_position}",
            layers.EncoderLayer,
            {"num_heads": HEADS, "d_ff": D_FF, "dropout": 0.0, "norm_position": norm_position},
            _encoder_inputs,
            (BATCH, SRC_LEN, D_MODEL),
            8 + 4 + 2 * 2,  # attention, FFN, two LayerNorms
        )
        for norm_position in ["post", "pre"]
    ],
    _case(
        "decoder_layer",
        layers.DecoderLayer,
        {"num_heads": HEADS, "d_ff": D_FF, "dropout": 0.0},
        lambda rng: {
            "inputs": normal(rng, BATCH, TGT_LEN, D_MODEL),
            "memory": normal(rng, BATCH, SRC_LEN, D_MODEL),
            "self_attention_mask": np.broadcast_to(causal_mask(TGT_LEN), (BATCH, TGT_LEN, TGT_LEN)),
            "memory_mask": padding_mask([SRC_LEN, 3], SRC_LEN),
        },
        (BATCH, TGT_LEN, D_MODEL),
        2 * 8 + 4 + 3 * 2,  # two attentions, FFN, 3 LayerNorms
    ),
    # Two layers of 16 (encoder) or 26 (decoder) weights; learned positions add a table, pre-norm
    # a final LayerNorm.
    *[
        _case(
            f"{name}_{positional_encoding}_{norm_position}",
            layer_cls,
            _stack_kwargs(norm_position, positional_encoding),
            inputs,
            (BATCH, output_len, D_MODEL),
            2 * layer_weights + extra_weights,
        )
        for name, layer_cls, inputs, output_len, layer_weights in [
            ("encoder", layers.Encoder, _encoder_inputs, SRC_LEN, 16),
            ("decoder", layers.Decoder, _decoder_stack_inputs, TGT_LEN, 26),
        ]
        for positional_encoding, norm_position, extra_weights in [
            ("sinusoidal", "post", 0),
            ("learned", "pre", 1 + 2),
        ]
    ],
]


@pytest.mark.parametrize(
    "layer_cls, init_kwargs, inputs, output_shape, num_weights, options", LAYER_CASES
)
def test_layer_passes_the_shared_layer_test(
    rng, layer_cls, init_kwargs, inputs, output_shape, num_weights, options
):
    run_layer_test(
        layer_cls,
        init_kwargs=init_kwargs,
        input_data=inputs(rng),
        expected_output_shape=output_shape,
        expected_num_trainable_weights=num_weights,
        **options,
    )


def test_every_public_layer_has_a_shared_layer_test():
    assert {case.values[0].__name__ for case in LAYER_CASES} == set(layers.__all__)


@pytest.mark.parametrize(
    "layer_cls", [layers.EncoderLayer, layers.DecoderLayer, layers.Encoder, layers.Decoder]
)
def test_symbolic_call_returns_attention_scores(layer_cls):
    kwargs = {"num_heads": HEADS, "d_ff": D_FF}
    if layer_cls in (layers.Encoder, layers.Decoder):
        kwargs["num_layers"] = 1
    args = [keras.Input(batch_shape=(BATCH, TGT_LEN, D_MODEL))]
    if layer_cls in (layers.DecoderLayer, layers.Decoder):
        args.append(keras.Input(batch_shape=(BATCH, SRC_LEN, D_MODEL)))
    eager = layer_cls(**kwargs)(*[np.zeros(a.shape, "float32") for a in args],
                                return_attention_scores=True)  # fmt: skip
    symbolic = layer_cls(**kwargs)(*args, return_attention_scores=True)
    assert isinstance(eager, tuple)
    assert isinstance(symbolic, tuple) and len(symbolic) == len(eager)


@pytest.mark.parametrize(
    "make, bad",
    [
        (lambda: layers.ScaledDotProductAttention(dropout=1.5), "1.5"),
        (lambda: layers.MultiHeadAttention(num_heads=0, key_dim=8), "num_heads=0"),
        (lambda: layers.MultiHeadAttention(num_heads=2, key_dim=-3), "key_dim=-3"),
        (lambda: layers.PositionalEncoding(max_wavelength=0), "0"),
        (lambda: layers.LearnedPositionalEncoding(max_length=0), "0"),
        (lambda: layers.PositionwiseFeedForward(d_ff=0), "d_ff=0"),
        (lambda: layers.SharedEmbedding(vocab_size=0, d_model=16), "vocab_size=0"),
        (lambda: layers.EncoderLayer(num_heads=2, d_ff=32, norm_position="middle"), "middle"),
        (lambda: layers.Encoder(num_layers=0, num_heads=2, d_ff=32), "0"),
        (
            lambda: layers.Decoder(num_layers=1, num_heads=2, d_ff=32, positional_encoding="rope"),
            "rope",
        ),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_value(make, bad):
    with pytest.raises(ValueError, match="Received") as error:
        make()
    assert bad in str(error.value)
