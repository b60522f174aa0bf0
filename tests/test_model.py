"""The Transformer model: configuration, parameter counts, masking, cached decoding, training,
saving and mixed precision (other backends: test_backends.py)."""

from __future__ import annotations

import dataclasses
import json

import keras
import numpy as np
import pytest

from keras_transformer import TransformerConfig, build_transformer

VOCAB, PAD, BOS = 50, 0, 2
FIRST_WORD = 4  # ids 0..3 are pad, unk, bos, eos


def tiny_config(**overrides) -> TransformerConfig:
    values = dict(vocab_size=VOCAB, num_layers=2, d_model=16, d_ff=32, num_heads=2, dropout=0.0)
    values.update(max_length=32, **overrides)
    return TransformerConfig(**values)


def perturbed_model(config: TransformerConfig, seed: int = 0) -> keras.Model:
    """A tiny model whose biases, LayerNorm gammas/betas are not at their trivial init values."""
    model = build_transformer(config)
    rng = np.random.default_rng(seed)
    model.set_weights([w + rng.normal(scale=0.1, size=w.shape) for w in model.get_weights()])
    return model


def words(rng, *shape):
    return rng.integers(FIRST_WORD, VOCAB, size=shape).astype("int32")


def with_padding(ids, lengths):
    """Set every position at or after `lengths[b]` to PAD."""
    ids = ids.copy()
    ids[np.arange(ids.shape[1])[None, :] >= np.asarray(lengths)[:, None]] = PAD
    return ids


def target_ids(rng, batch, length):
    ids = words(rng, batch, length)
    ids[:, 0] = BOS
    return ids


def logits_of(model, source, target):
    return keras.ops.convert_to_numpy(model({"source": source, "target": target}))


# Parameter counts ------------------------------------------------------------------------------


def expected_num_params(c: TransformerConfig) -> int:
    """Count of the paper's weights, written out layer by layer."""
    d, h = c.d_model, c.num_heads

    def attention():
        q_and_k = 2 * (d * h * c.d_k + h * c.d_k)
        v = d * h * c.d_v + h * c.d_v
        out = h * c.d_v * d + d
        return q_and_k + v + out

    ffn = d * c.d_ff + c.d_ff + c.d_ff * d + d
    norm = 2 * d
    encoder_layer = attention() + ffn + 2 * norm
    decoder_layer = 2 * attention() + ffn + 3 * norm
    embeddings = c.vocab_size * d * (1 if c.share_embeddings else 2)
    total = embeddings + c.num_layers * (encoder_layer + decoder_layer)
    if c.positional_encoding == "learned":
        total += 2 * c.max_length * d
    if c.norm_position == "pre":
        total += 2 * norm  # final LayerNorm of the encoder and of the decoder
    return total


@pytest.mark.parametrize("preset, paper, tolerance", [("base", 65e6, 0.05), ("big", 213e6, 0.02)])
def test_parameter_count_matches_paper(preset, paper, tolerance):
    config = TransformerConfig.preset(preset, vocab_size=37000)
    count = build_transformer(config).count_params()
    assert count == expected_num_params(config)
    assert abs(count - paper) / paper < tolerance, f"{preset}: {count} parameters"


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"share_embeddings": False},
        {"positional_encoding": "learned"},
        {"norm_position": "pre", "d_k": 4, "d_v": 6},
    ],
)
def test_parameter_count_of_variants(overrides):
    config = tiny_config(**overrides)
    model = build_transformer(config)
    assert model.count_params() == expected_num_params(config)
    embeddings = [w for w in model.weights if w.shape == (VOCAB, config.d_model)]
    assert len(embeddings) == (1 if config.share_embeddings else 2)


# Configuration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, bad",
    [
        ({"d_model": 30, "num_heads": 4}, "d_model=30"),
        ({"dropout": -0.1}, "dropout=-0.1"),
        ({"attention_dropout": 1.0}, "attention_dropout=1.0"),
        ({"label_smoothing": 1.5}, "label_smoothing=1.5"),
        ({"positional_encoding": "rotary"}, "rotary"),
        ({"norm_position": "sandwich"}, "sandwich"),
        ({"num_layers": 0}, "num_layers=0"),
        ({"d_ff": 2.5}, "d_ff=2.5"),
        ({"vocab_size": 3}, "vocab_size=3"),  # no room for the special ids 0..3
    ],
)
def test_config_rejects_bad_values(overrides, bad):
    with pytest.raises(ValueError, match="Received") as error:
        tiny_config(**overrides)
    assert bad in str(error.value)


def test_special_ids_come_from_the_vocabulary_layout():
    from keras_transformer import constants

    config = tiny_config()
    ids = (config.pad_id, config.unk_id, config.bos_id, config.eos_id)
    assert ids == (constants.PAD_ID, constants.UNK_ID, constants.BOS_ID, constants.EOS_ID)
    assert "pad_id" not in config.to_dict()  # not a field: it cannot disagree with the data
    # config.json files of earlier versions carry the ids: equal ones load, others are refused
    legacy = {**config.to_dict(), "pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}
    assert TransformerConfig.from_dict(legacy) == config
    with pytest.raises(ValueError, match="bos_id"):
        TransformerConfig.from_dict({**legacy, "bos_id": 5})


def test_config_presets_have_the_papers_values():
    base = TransformerConfig.base(vocab_size=37000)
    assert (base.num_layers, base.d_model, base.d_ff, base.num_heads) == (6, 512, 2048, 8)
    assert (base.d_k, base.d_v) == (64, 64)
    assert (base.dropout, base.label_smoothing) == (0.1, 0.1)
    assert base.share_embeddings and base.positional_encoding == "sinusoidal"
    assert base.norm_position == "post"
    big = TransformerConfig.big(vocab_size=37000)
    assert (big.num_layers, big.d_model, big.d_ff, big.num_heads) == (6, 1024, 4096, 16)
    assert (big.d_k, big.d_v) == (64, 64)
    assert (big.dropout, big.label_smoothing) == (0.3, 0.1)
    assert TransformerConfig.big(vocab_size=37000, dropout=0.1).dropout == 0.1
    assert TransformerConfig.preset("base", vocab_size=37000) == base
    with pytest.raises(ValueError, match="huge"):
        TransformerConfig.preset("huge", vocab_size=37000)


def test_config_is_frozen_and_round_trips():
    config = tiny_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 32
    values = config.to_dict()
    json.dumps(values)
    assert TransformerConfig.from_dict(values) == config
    with pytest.raises(ValueError, match="colour"):
        TransformerConfig.from_dict({**values, "colour": "blue"})
    with pytest.raises(ValueError, match="num_heads=3"):
        config.replace(num_heads=3)


def test_build_transformer_rejects_a_dict():
    with pytest.raises(TypeError, match="dict"):
        build_transformer(tiny_config().to_dict())


# Masking ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", [{}, {"norm_position": "pre"}])
def test_causality_future_targets_do_not_change_past_logits(overrides):
    rng = np.random.default_rng(1)
    model = perturbed_model(tiny_config(**overrides))
    source, target = words(rng, 2, 6), target_ids(rng, 2, 7)
    logits = logits_of(model, source, target)
    for k in (1, 3, 6):
        changed = target.copy()
        changed[:, k:] = words(rng, 2, 7 - k)
        changed_logits = logits_of(model, source, changed)
        np.testing.assert_allclose(changed_logits[:, :k], logits[:, :k], atol=1e-5, rtol=0)
        assert np.abs(changed_logits[:, k:] - logits[:, k:]).max() > 1e-4


@pytest.mark.parametrize("side, seed", [("source", 2), ("target", 3)])
def test_padding_is_inert(side, seed):
    """Three PAD ids after the source (or the target) leave the logits of the 4 targets alone."""
    rng = np.random.default_rng(seed)
    model = perturbed_model(tiny_config())
    inputs = {"source": words(rng, 2, 5), "target": target_ids(rng, 2, 4)}
    logits = logits_of(model, inputs["source"], inputs["target"])
    padded = dict(inputs)
    padded[side] = np.concatenate([inputs[side], np.full((2, 3), PAD, "int32")], axis=1)
    got = logits_of(model, padded["source"], padded["target"])[:, :4]
    np.testing.assert_allclose(got, logits, atol=1e-5, rtol=0)


def test_each_sentence_is_independent_of_the_batch_padding():
    """A short sentence padded inside a batch gets the logits it gets alone, unpadded."""
    rng = np.random.default_rng(4)
    model = perturbed_model(tiny_config())
    source = with_padding(words(rng, 2, 6), [6, 3])
    target = with_padding(target_ids(rng, 2, 5), [5, 2])
    batch_logits = logits_of(model, source, target)
    alone = logits_of(model, source[1:, :3], target[1:, :2])
    np.testing.assert_allclose(batch_logits[1:, :2], alone, atol=1e-5, rtol=0)


# Cached decoding -------------------------------------------------------------------------------


@pytest.mark.parametrize("fixed_cache", [False, True], ids=["growing", "fixed"])
@pytest.mark.parametrize(
    "overrides",
    [{}, {"share_embeddings": False}, {"positional_encoding": "learned"}, {"norm_position": "pre"}],
    ids=["paper", "unshared", "learned", "pre"],
)
def test_cached_decoding_equals_full_pass(overrides, fixed_cache):
    rng = np.random.default_rng(5)
    model = perturbed_model(tiny_config(**overrides))
    length = 6
    source = with_padding(words(rng, 2, 7), [7, 4])
    target = target_ids(rng, 2, length)
    full = logits_of(model, source, target)  # (batch, length, vocab)

    memory, memory_mask = model.encode(source)
    cache = model.init_cache(memory, max_length=length if fixed_cache else None)
    start = 0
    for step_len in (2, 1, 1, 1, 1):  # a two-token prefix, then one token per step
        logits, cache = model.decode(
            target[:, start : start + step_len],
            memory_mask,
            cache,
            cache_update_index=start if fixed_cache else None,
        )
        assert keras.backend.standardize_dtype(logits.dtype) == "float32"
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(logits), full[:, start : start + step_len], atol=1e-5
        )
        start += step_len
        cache_len = length if fixed_cache else start
        assert tuple(cache[0]["self"]["key"].shape) == (2, 2, cache_len, 8)
    assert start == length


# Training, saving, mixed precision -------------------------------------------------------------


def test_one_fit_step_moves_most_weights_and_keeps_them_finite():
    rng = np.random.default_rng(6)
    model = build_transformer(tiny_config(dropout=0.1))
    source = with_padding(words(rng, 4, 6), [6, 5, 4, 3])
    target = with_padding(target_ids(rng, 4, 6), [6, 6, 3, 2])
    labels = np.concatenate([target[:, 1:], np.zeros((4, 1), "int32")], axis=1)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.optimizer.build(model.trainable_variables)  # as README's example: one trace, not two
    before = [keras.ops.convert_to_numpy(w) for w in model.trainable_weights]
    history = model.fit(
        {"source": source, "target": target}, labels, batch_size=4, epochs=1, verbose=0
    )
    after = [keras.ops.convert_to_numpy(w) for w in model.trainable_weights]
    assert np.isfinite(history.history["loss"][0])
    assert np.all([np.all(np.isfinite(w)) for w in after])
    changed = sum(not np.array_equal(a, b) for a, b in zip(before, after))
    assert changed > len(before) // 2


def test_dropout_is_active_only_in_training():
    rng = np.random.default_rng(7)
    model = build_transformer(tiny_config(dropout=0.3))
    inputs = {"source": words(rng, 2, 5), "target": target_ids(rng, 2, 4)}
    inference = keras.ops.convert_to_numpy(model(inputs))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(inputs)), inference)
    trained = keras.ops.convert_to_numpy(model(inputs, training=True))
    assert np.abs(trained - inference).max() > 1e-3


@pytest.mark.parametrize("overrides", [{}, {"share_embeddings": False, "norm_position": "pre"}])
def test_save_and_load_gives_identical_logits(tmp_path, overrides):
    rng = np.random.default_rng(8)
    model = perturbed_model(tiny_config(positional_encoding="learned", **overrides))
    source = with_padding(words(rng, 2, 6), [6, 3])
    target = target_ids(rng, 2, 5)
    logits = logits_of(model, source, target)
    path = tmp_path / "transformer.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(logits_of(loaded, source, target), logits)
    # The loaded model still decodes step by step with the cache.
    memory, memory_mask = loaded.encode(source)
    step_logits, _ = loaded.decode(target[:, :1], memory_mask, loaded.init_cache(memory))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(step_logits)[:, 0], logits[:, 0], atol=1e-5
    )


def test_mixed_bfloat16_model_builds_and_gives_float32_logits():
    rng = np.random.default_rng(9)
    source, target = words(rng, 2, 5), target_ids(rng, 2, 4)
    try:
        keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
        model = build_transformer(tiny_config())
        logits = model({"source": source, "target": target})
        assert keras.backend.standardize_dtype(logits.dtype) == "float32"
        assert all(w.dtype == "float32" for w in model.weights)
        assert np.all(np.isfinite(keras.ops.convert_to_numpy(logits)))
        memory, memory_mask = model.encode(source)
        step_logits, _ = model.decode(target[:, :1], memory_mask, model.init_cache(memory))
        assert keras.backend.standardize_dtype(step_logits.dtype) == "float32"
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
