"""Outputs of every public layer and of the model on the current Keras backend.

`tests/test_backends.py` computes them under TensorFlow, saves the inputs and the weights
(`save_inputs`), and runs this module under another backend:

    KERAS_BACKEND=jax python -m keras_transformer.testing.backend_check IN.npz OUT.npz

The child builds the same layers, loads the parent's weights with `set_weights` (same order
as the parent's `get_weights`) and writes every output to OUT.npz, for the parent to compare.
Layers and model use `keras.ops` only, so the numbers agree up to float32 rounding.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import keras
import numpy as np

from keras_transformer import TransformerConfig, build_transformer
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

BATCH, SRC_LEN, TGT_LEN, D_MODEL, HEADS, D_FF, VOCAB = 2, 6, 5, 16, 2, 32, 50
KEY_DIM = D_MODEL // HEADS
SOURCE_LENGTHS, TARGET_LENGTHS = (6, 4), (5, 3)  # the second sentence is padded
PAD, BOS, FIRST_WORD = 0, 2, 4  # ids 0..3 are pad, unk, bos, eos


@dataclass(frozen=True)
class Case:
    """A fresh layer (or model) and the calls whose outputs are compared.

    `run(layer, inputs)` returns `{name: tensor}`; its first call also builds the layer.
    """

    make: Callable[[], keras.layers.Layer]
    run: Callable[[keras.layers.Layer, dict], dict]


# Inputs ----------------------------------------------------------------------------------------


def _padding_mask(lengths, max_len):
    """Boolean `(batch, max_len)`, True for the first `lengths[b]` positions."""
    return np.arange(max_len)[None, :] < np.asarray(lengths)[:, None]


def make_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 activations, int32 token ids (0 = padding) and boolean masks."""
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return rng.normal(size=shape).astype("float32")

    source_mask = _padding_mask(SOURCE_LENGTHS, SRC_LEN)  # (batch, src_len)
    target_mask = _padding_mask(TARGET_LENGTHS, TGT_LEN)  # (batch, tgt_len)
    source_ids = rng.integers(FIRST_WORD, VOCAB, size=(BATCH, SRC_LEN)).astype("int32")
    target_ids = rng.integers(FIRST_WORD, VOCAB, size=(BATCH, TGT_LEN)).astype("int32")
    target_ids[:, 0] = BOS
    attention_mask = rng.random((BATCH, HEADS, TGT_LEN, SRC_LEN)) < 0.5
    attention_mask[..., 0] = True  # every query sees at least one key
    return {
        "query_heads": normal(BATCH, HEADS, TGT_LEN, KEY_DIM),  # (batch, h, tgt_len, d_k)
        "key_heads": normal(BATCH, HEADS, SRC_LEN, KEY_DIM),  # (batch, h, src_len, d_k)
        "value_heads": normal(BATCH, HEADS, SRC_LEN, 4),  # (batch, h, src_len, d_v)
        "attention_mask": attention_mask,  # (batch, h, tgt_len, src_len)
        "target": normal(BATCH, TGT_LEN, D_MODEL),  # (batch, tgt_len, d_model)
        "memory": normal(BATCH, SRC_LEN, D_MODEL),  # (batch, src_len, d_model)
        "source_mask": source_mask,
        "target_mask": target_mask,
        "causal_mask": np.tril(np.ones((1, TGT_LEN, TGT_LEN), bool)),  # (1, tgt_len, tgt_len)
        "source_ids": np.where(source_mask, source_ids, PAD).astype("int32"),
        "target_ids": np.where(target_mask, target_ids, PAD).astype("int32"),
    }


# Layer cases -----------------------------------------------------------------------------------


def _run_multi_head_attention(mha, x):
    target, memory = x["target"], x["memory"]
    cross_mask = x["source_mask"][:, None, :]  # (batch, 1, src_len)
    out = {"cross": mha(target, memory, attention_mask=cross_mask)}
    out["cross_cached"], _ = mha(target, None, attention_mask=cross_mask,
                                 cache=mha.project_key_value(memory))  # fmt: skip
    # Growing self-attention cache: a two-token prefix, then one token.
    empty = np.zeros((BATCH, HEADS, 0, KEY_DIM), "float32")
    cache = {"key": empty, "value": empty}
    out["prefix"], cache = mha(target[:, :2], target[:, :2],
                               attention_mask=x["causal_mask"][:, :2, :2], cache=cache)  # fmt: skip
    out["step"], cache = mha(target[:, 2:3], target[:, 2:3], cache=cache)
    out["grown_key"] = cache["key"]  # (batch, h, 3, d_k)
    # Fixed-size cache written at position 1.
    zeros = np.zeros((BATCH, HEADS, TGT_LEN, KEY_DIM), "float32")
    out["fixed_step"], cache = mha(
        target[:, 1:2], target[:, 1:2], attention_mask=x["causal_mask"][:, 1:2],
        cache={"key": zeros, "value": zeros}, cache_update_index=1,
    )  # fmt: skip
    out["fixed_value"] = cache["value"]  # (batch, h, tgt_len, d_v)
    return out


def _run_scaled_dot_product_attention(layer, x):
    output, weights = layer(
        x["query_heads"], x["key_heads"], x["value_heads"], attention_mask=x["attention_mask"]
    )
    return {"output": output, "weights": weights}


def _run_positions(layer, x):
    return {"start_0": layer(x["target"]), "start_3": layer(x["target"], start_index=3)}


def _run_shared_embedding(layer, x):
    return {"lookup": layer(x["target_ids"]), "reverse": layer(x["target"], reverse=True)}


def _run_encoder(layer, x):
    output, weights = layer(
        x["memory"], padding_mask=x["source_mask"], return_attention_scores=True
    )
    return {"output": output, **_numbered("weights", weights)}


def _run_decoder_layer(layer, x):
    self_mask = np.logical_and(x["causal_mask"], x["target_mask"][:, None, :])  # (b, tgt, tgt)
    output, weights = layer(
        x["target"], x["memory"], self_attention_mask=self_mask, memory_mask=x["source_mask"],
        return_attention_scores=True,
    )  # fmt: skip
    return {"output": output, "weights": weights}


def _run_decoder(layer, x):
    output, weights = layer(
        x["target"], x["memory"], memory_mask=x["source_mask"], target_mask=x["target_mask"],
        return_attention_scores=True,
    )  # fmt: skip
    return {"output": output, **_numbered("weights", weights)}


def _numbered(name, tensors):
    return {f"{name}_{i}": tensor for i, tensor in enumerate(tensors)}


def _stack(cls, norm_position, positional_encoding):
    return lambda: cls(
        num_layers=2, num_heads=HEADS, d_ff=D_FF, dropout=0.0, norm_position=norm_position,
        positional_encoding=positional_encoding, max_length=TGT_LEN + SRC_LEN,
    )  # fmt: skip


# The model -------------------------------------------------------------------------------------


def model_config(**overrides) -> TransformerConfig:
    values = dict(num_layers=2, d_model=D_MODEL, d_ff=D_FF, num_heads=HEADS, dropout=0.0)
    values.update(overrides)
    return TransformerConfig(vocab_size=VOCAB, max_length=16, **values)


def _run_model(model, x):
    """Logits of a padded forward pass, and cached decoding (fixed and growing cache)."""
    source, target = x["source_ids"], x["target_ids"]
    out = {"logits": model({"source": source, "target": target})}  # (b, tgt_len, vocab)
    memory, source_mask = model.encode(source)
    out["memory"] = memory
    cache = model.init_cache(memory, max_length=TGT_LEN)
    out["prefix"], cache = model.decode(target[:, :2], source_mask, cache, cache_update_index=0)
    out["step"], cache = model.decode(target[:, 2:3], source_mask, cache, cache_update_index=2)
    out["grow_step"], _ = model.decode(target[:, :1], source_mask, model.init_cache(memory))
    return out


CASES: dict[str, Case] = {
    "scaled_dot_product_attention": Case(
        ScaledDotProductAttention, _run_scaled_dot_product_attention
    ),
    "multi_head_attention": Case(
        lambda: MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM), _run_multi_head_attention
    ),
    "positional_encoding": Case(PositionalEncoding, _run_positions),
    "learned_positional_encoding": Case(
        lambda: LearnedPositionalEncoding(max_length=TGT_LEN + 3), _run_positions
    ),
    "positionwise_feed_forward": Case(
        lambda: PositionwiseFeedForward(d_ff=D_FF), lambda layer, x: {"output": layer(x["target"])}
    ),
    "shared_embedding": Case(
        lambda: SharedEmbedding(vocab_size=VOCAB, d_model=D_MODEL), _run_shared_embedding
    ),
    **{
        f"encoder_layer_{norm}": Case(
            lambda norm=norm: EncoderLayer(HEADS, D_FF, dropout=0.0, norm_position=norm),
            _run_encoder,
        )
        for norm in ("post", "pre")
    },
    **{
        f"decoder_layer_{norm}": Case(
            lambda norm=norm: DecoderLayer(HEADS, D_FF, dropout=0.0, norm_position=norm),
            _run_decoder_layer,
        )
        for norm in ("post", "pre")
    },
    "encoder_post_sinusoidal": Case(_stack(Encoder, "post", "sinusoidal"), _run_encoder),
    "encoder_pre_learned": Case(_stack(Encoder, "pre", "learned"), _run_encoder),
    "decoder_post_sinusoidal": Case(_stack(Decoder, "post", "sinusoidal"), _run_decoder),
    "decoder_pre_learned": Case(_stack(Decoder, "pre", "learned"), _run_decoder),
    "model_paper": Case(lambda: build_transformer(model_config()), _run_model),
    "model_pre_learned_unshared": Case(
        lambda: build_transformer(
            model_config(norm_position="pre", positional_encoding="learned", share_embeddings=False)
        ),
        _run_model,
    ),
}


# Running ---------------------------------------------------------------------------------------


def compute_case(name: str, inputs: dict, weights: list | None, rng) -> tuple[dict, list]:
    """Outputs `{"<name>.<output>": array}` of one case, and the weights it ran with.

    With `weights` (the child's side) the case loads them; without (the parent's), it gets its
    initial weights plus noise, so that biases, LayerNorm gammas and betas are not trivial.
    """
    case = CASES[name]
    layer = case.make()
    case.run(layer, inputs)  # builds the layer
    if weights is None:
        weights = [w + rng.normal(scale=0.2, size=w.shape) for w in layer.get_weights()]
    layer.set_weights(weights)
    outputs = case.run(layer, inputs)
    arrays = {f"{name}.{key}": keras.ops.convert_to_numpy(v) for key, v in outputs.items()}
    return arrays, layer.get_weights()


def compute_outputs(inputs: dict, seed: int = 0) -> tuple[dict[str, np.ndarray], dict]:
    """Every case with fresh noisy weights (the parent's side): `(outputs, {case: weights})`."""
    rng = np.random.default_rng(seed)
    keras.utils.set_random_seed(seed)
    outputs, weights = {}, {}
    for name in CASES:
        case_outputs, weights[name] = compute_case(name, inputs, None, rng)
        outputs.update(case_outputs)
    return outputs, weights


def save_inputs(path, inputs: dict[str, np.ndarray], weights: dict[str, list]) -> None:
    """One npz: `input:<name>` arrays and `weight:<case>:<i>` in `get_weights` order."""
    arrays = {f"input:{name}": value for name, value in inputs.items()}
    for case, values in weights.items():
        arrays.update({f"weight:{case}:{i}": value for i, value in enumerate(values)})
    np.savez(path, **arrays)


def load_inputs(path) -> tuple[dict[str, np.ndarray], dict[str, list]]:
    """The inverse of `save_inputs`."""
    inputs, numbered = {}, {}
    with np.load(path) as data:
        for key in data.files:
            kind, _, rest = key.partition(":")
            if kind == "input":
                inputs[rest] = data[key]
            else:
                case, _, index = rest.rpartition(":")
                numbered.setdefault(case, {})[int(index)] = data[key]
    weights = {case: [values[i] for i in range(len(values))] for case, values in numbered.items()}
    return inputs, weights


def main(argv: list[str]) -> int:
    """Write every case's outputs, or `error.<case>` with the exception, to OUT.npz."""
    if len(argv) != 2:
        print("usage: python -m keras_transformer.testing.backend_check IN.npz OUT.npz")
        return 2
    inputs, weights = load_inputs(argv[0])
    results = {"backend": np.array(keras.backend.backend())}
    for name in CASES:
        try:
            outputs, _ = compute_case(name, inputs, weights.get(name, []), rng=None)
            results.update(outputs)
        except Exception as error:  # reported per case by the parent test
            results[f"error.{name}"] = np.array("".join(traceback.format_exception(error)))
    np.savez(argv[1], **results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
