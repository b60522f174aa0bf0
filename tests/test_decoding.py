"""Cached decoding, translate_ids, Translator and sampling on small random models.

References are independent of the decoding code: full (uncached) forward passes of the
Keras model with teacher forcing, and NumPy."""

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import (
    DocumentOptions,
    SearchOptions,
    TransformerConfig,
    artifacts,
    build_transformer,
)
from keras_transformer.decoding import (
    LoopOptions,
    Sampling,
    SamplingOptions,
    Translator,
    decode,
    fixed_shape_step,
    length_penalty,
    per_source_step,
    top_k_filter,
    top_p_filter,
    translate_ids,
)
from keras_transformer.testing.model_dir import make_model_dir
from keras_transformer.testing.steps import stateless_step
from keras_transformer.tracing import graph_function

PAD, BOS, EOS = 0, 2, 3


def _eos_prone(model, config, strength=1.5):
    """Push the decoder output towards the EOS embedding so hypotheses end at varied
    lengths (an untrained model never emits EOS)."""
    eos = model.token_embedding.embeddings.numpy()[config.eos_id]
    last_norm = model.decoder.layers[-1].feed_forward_norm
    last_norm.beta.assign(strength * eos / np.linalg.norm(eos))
    return model


@pytest.fixture(scope="module")
def config():
    return TransformerConfig.tiny(
        48, num_layers=2, d_model=32, d_ff=64, num_heads=4, dropout=0.0, max_length=40
    )


@pytest.fixture(scope="module")
def model(config):
    keras.utils.set_random_seed(1)
    return _eos_prone(build_transformer(config), config)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model_dir(str(tmp_path_factory.mktemp("model")), vocab_size=64)


def _sources(rng, lengths, vocab):
    """Right-padded source ids, each row ending in EOS."""
    ids = np.zeros((len(lengths), max(lengths)), np.int32)
    for row, n in enumerate(lengths):
        ids[row, : n - 1] = rng.integers(4, vocab, n - 1)
        ids[row, n - 1] = EOS
    return ids


def _teacher_forced_log_prob(model, source, tokens):
    """log P(tokens | source) from one full forward pass (no cache)."""
    target = np.array([[BOS] + list(tokens[:-1])], np.int32)
    logits = model({"source": source[None], "target": target}).numpy()[0].astype("f8")
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))  # (len, vocab)
    return float(sum(log_probs[i, t] for i, t in enumerate(tokens)))


def _hypothesis(row):
    """Tokens of an output row: up to and with EOS, no padding."""
    row = list(row)
    return row[: row.index(EOS) + 1] if EOS in row else [t for t in row if t != PAD]


@pytest.mark.parametrize("padded", [False, True])
def test_cached_decoding_matches_full_pass(model, config, padded):
    rng = np.random.default_rng(0)
    source = _sources(rng, [5, 9, 2], config.vocab_size)
    target = np.concatenate([np.full((3, 1), BOS), rng.integers(4, 48, (3, 7))], 1)
    full = model({"source": source, "target": target}).numpy()  # (3, 8, vocab)
    beam = 2
    memory, mask = model.encode(tf.constant(source))
    if padded:  # a row per hypothesis: the loop would tile cache and shared by beam
        step_fn = fixed_shape_step(model, memory, mask, 8)
        tile = lambda nest: tf.nest.map_structure(lambda t: tf.repeat(t, beam, axis=0), nest)  # noqa: E731
        cache, shared = tile(step_fn.cache), tile(step_fn.shared)
    else:  # per source: beams stay in their slots (no re-ranking)
        step_fn = per_source_step(model, memory, mask, beam)
        cache, shared = step_fn.cache, step_fn.shared
    ids = tf.constant(np.repeat(target, beam, axis=0), tf.int32)  # (batch * beam, 8)
    for step in range(8):
        prefix = ids if padded else ids[:, : step + 1]
        logits, cache = step_fn.fn(prefix, tf.constant(step), cache, shared)
        expected = np.repeat(full[:, step], beam, axis=0)
        np.testing.assert_allclose(logits.numpy(), expected, atol=1e-4)


def test_scores_are_model_log_probs_over_length_penalty(model, config):
    rng = np.random.default_rng(1)
    source = _sources(rng, [6, 9, 4], config.vocab_size)
    ids, scores = translate_ids(model, source, SearchOptions(n_best=3, max_extra_length=8))
    ids, scores = ids.numpy(), scores.numpy()
    assert ids.shape[:2] == scores.shape == (3, 3)
    assert np.all(np.diff(scores, axis=1) <= 0)
    lengths = set()
    for item, k in np.ndindex(3, 3):
        tokens = _hypothesis(ids[item, k])
        lengths.add((len(tokens), tokens[-1] == EOS))
        log_p = _teacher_forced_log_prob(model, source[item], tokens)
        expected = log_p / length_penalty(len(tokens), 0.6).numpy()
        np.testing.assert_allclose(scores[item, k], expected, rtol=1e-4, atol=1e-4)
    assert any(eos for _, eos in lengths)  # hypotheses ending in EOS are tested
    assert any(not eos for _, eos in lengths)  # and ones cut at the length limit


def test_padded_decode_and_growing_cache_agree(model, config):
    source = _sources(np.random.default_rng(2), [7, 3], config.vocab_size)
    grow_ids, grow_scores = translate_ids(
        model, source, SearchOptions(n_best=4, max_extra_length=6)
    )
    pad_ids, pad_scores = translate_ids(
        model, source, SearchOptions(n_best=4, max_extra_length=6, padded_decode=True)
    )
    np.testing.assert_array_equal(grow_ids.numpy(), pad_ids.numpy())
    np.testing.assert_allclose(grow_scores.numpy(), pad_scores.numpy(), atol=1e-5)


def test_mixed_batch_gives_what_each_source_gives_alone(model, config):
    rng = np.random.default_rng(3)
    lengths = [1, 30, 4, 60]  # [EOS] alone, long, short, longer than max_length=40
    source = _sources(rng, lengths, config.vocab_size)
    ids, scores = translate_ids(model, source, SearchOptions(max_extra_length=5))
    assert ids.shape[0] == 4 and scores.shape == (4,)
    for row, n in enumerate(lengths):
        alone_ids, alone_score = translate_ids(
            model, source[row : row + 1, :n], SearchOptions(max_extra_length=5)
        )
        assert _hypothesis(ids.numpy()[row]) == _hypothesis(alone_ids.numpy()[0])
        np.testing.assert_allclose(scores.numpy()[row], alone_score.numpy()[0], atol=1e-4)
        limit = min(min(n, config.max_length) + 5, config.max_length)
        assert len(_hypothesis(ids.numpy()[row])) <= limit


def test_empty_and_too_long_sources(model, config, caplog):
    empty = tf.zeros((2, 0), tf.int32)  # no tokens at all: each source becomes [EOS]
    ids, scores = translate_ids(model, empty, SearchOptions(max_extra_length=3))
    eos_only, eos_scores = translate_ids(
        model, tf.constant([[EOS]]), SearchOptions(max_extra_length=3)
    )
    assert _hypothesis(ids.numpy()[0]) == _hypothesis(eos_only.numpy()[0])
    np.testing.assert_allclose(scores.numpy()[0], eos_scores.numpy()[0], atol=1e-5)
    too_long = _sources(np.random.default_rng(4), [100], config.vocab_size)
    cut = np.concatenate([too_long[:, : config.max_length - 1], [[EOS]]], 1)
    with caplog.at_level(logging.WARNING, logger="keras_transformer"):
        long_ids, _ = translate_ids(model, too_long, SearchOptions(max_extra_length=3))
    assert sum("truncated" in r.getMessage() for r in caplog.records) == 1
    cut_ids, _ = translate_ids(model, cut, SearchOptions(max_extra_length=3))
    np.testing.assert_array_equal(long_ids.numpy(), cut_ids.numpy())
    assert long_ids.shape[1] <= config.max_length


def test_n_best_shapes_and_ragged_input(model, config):
    ragged = tf.ragged.constant([[5, 6, EOS], [7, EOS]])
    best_ids, best_scores = translate_ids(
        model, ragged, SearchOptions(beam_size=3, max_extra_length=4)
    )
    assert best_ids.shape.rank == 2 and best_scores.shape == (2,)
    ids, scores = translate_ids(
        model, ragged, SearchOptions(beam_size=3, n_best=3, max_extra_length=4)
    )
    assert ids.shape[:2] == (2, 3) and scores.shape == (2, 3)
    np.testing.assert_allclose(scores.numpy()[:, 0], best_scores.numpy(), atol=1e-6)
    assert np.all(np.diff(scores.numpy(), axis=1) <= 0)
    with pytest.raises(ValueError, match="n_best=3, beam_size=2"):
        translate_ids(model, ragged, SearchOptions(beam_size=2, n_best=3))


def test_greedy_is_the_argmax_chain_and_beam_one(model, config):
    source = _sources(np.random.default_rng(5), [6, 3], config.vocab_size)
    memory, mask = model.encode(tf.constant(source))
    step = per_source_step(model, memory, mask, 1)
    greedy, log_probs = decode(Sampling(), step, tf.fill([2], BOS), 10, LoopOptions(EOS))
    for item in range(2):  # reference: re-run the full model on the growing prefix
        prefix = [BOS]
        while len(prefix) <= 10 and (len(prefix) == 1 or prefix[-1] != EOS):
            logits = model({"source": source[item : item + 1], "target": np.array([prefix])})
            prefix.append(int(np.argmax(logits.numpy()[0, -1])))
        assert _hypothesis(greedy.numpy()[item, 1:]) == prefix[1:]
    beam_ids, beam_scores = translate_ids(
        model, source, SearchOptions(beam_size=1, alpha=0.0, max_extra_length=10 - 6)
    )
    assert _hypothesis(beam_ids.numpy()[0]) == _hypothesis(greedy.numpy()[0, 1:])
    np.testing.assert_allclose(beam_scores.numpy()[0], log_probs.numpy()[0], atol=1e-5)


def _fixed_logits_fn(logits):
    """A stateless `StepFunction` whose logits `(vocab,)` are the same every step."""
    table = tf.constant(logits, tf.float32)
    return stateless_step(lambda ids, step: tf.tile(table[None], [tf.shape(ids)[0], 1]))


def test_top_k_sampling_stays_in_the_top_k():
    logits = np.array([0.3, 2.0, -1.0, 1.5, 0.9, 1.2, -0.5, 0.0], np.float32)
    fn = _fixed_logits_fn(logits)
    top_k = SamplingOptions("top_k", top_k=3, seed=(1, 2))
    ids, _ = decode(Sampling(top_k), fn, tf.fill([400], 0), 6, LoopOptions(eos_id=99))
    emitted = set(ids.numpy()[:, 1:].ravel().tolist())
    assert emitted == {1, 3, 5}  # the three largest logits, each drawn
    again, _ = decode(Sampling(top_k), fn, tf.fill([400], 0), 6, LoopOptions(eos_id=99))
    np.testing.assert_array_equal(ids.numpy(), again.numpy())  # stateless: reproducible
    bisected = SamplingOptions("top_k", top_k=3, seed=(1, 2), bisect=True)  # XLA's filter
    same, _ = decode(Sampling(bisected), fn, tf.fill([400], 0), 6, LoopOptions(eos_id=99))
    np.testing.assert_array_equal(ids.numpy(), same.numpy())


@pytest.mark.parametrize("padded", [False, True])
def test_sampling_rows_past_the_real_ones_are_done_before_the_first_step(model, config, padded):
    # XLA's padding rows (`rows=`): nothing decoded for them, the real rows' draws unchanged
    # (reference: the same call decoding every row).
    from keras_transformer.decoding.search import sample_ids

    source = _sources(np.random.default_rng(4), [5, 3, 6, 4], config.vocab_size)
    search = SearchOptions(max_extra_length=6, padded_decode=padded)
    full_ids, full_scores = sample_ids(model, source, search, "sample", top_k=5, seed=9)
    ids, scores = sample_ids(model, source, search, "sample", top_k=5, seed=9, rows=2)
    np.testing.assert_array_equal(ids.numpy()[:2], full_ids.numpy()[:2])
    np.testing.assert_allclose(scores.numpy()[:2], full_scores.numpy()[:2], rtol=1e-5)
    assert (ids.numpy()[2:] == config.pad_id).all()
    assert (full_ids.numpy()[2:] != config.pad_id).any()


def test_top_p_sampling_stays_in_the_nucleus():
    probs = np.array([0.05, 0.4, 0.02, 0.3, 0.15, 0.08], np.float64)
    fn = _fixed_logits_fn(np.log(probs))
    top_p = Sampling(SamplingOptions("top_p", top_p=0.8))
    ids, _ = decode(top_p, fn, tf.fill([500], 0), 4, LoopOptions(eos_id=99))
    # sorted: 0.4, 0.3, 0.15 (mass 0.85 >= 0.8): the nucleus is {1, 3, 4}
    assert set(ids.numpy()[:, 1:].ravel().tolist()) == {1, 3, 4}
    bisected = Sampling(SamplingOptions("top_p", top_p=0.8, bisect=True))  # XLA's filter
    same, _ = decode(bisected, fn, tf.fill([500], 0), 4, LoopOptions(eos_id=99))
    np.testing.assert_array_equal(ids.numpy(), same.numpy())


def test_filters_match_numpy():
    rng = np.random.default_rng(6)
    logits = rng.standard_normal((5, 20)).astype("f4")
    kept = np.isfinite(top_k_filter(tf.constant(logits), 4).numpy())
    np.testing.assert_array_equal(kept, logits >= np.sort(logits, 1)[:, -4:-3])
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    kept = np.isfinite(top_p_filter(tf.constant(logits), 0.7).numpy())
    for row in range(5):
        order = np.argsort(-probs[row])
        n = np.searchsorted(np.cumsum(probs[row, order]), 0.7) + 1  # smallest mass >= 0.7
        assert set(np.flatnonzero(kept[row])) == set(order[:n])


def test_translator_strings_batches_and_export_signature(model_dir, caplog):
    model, config, tokenizer = artifacts.load_trained(model_dir)
    _eos_prone(model, config)
    translator = Translator(model, tokenizer, SearchOptions(max_extra_length=6))
    texts = ["The cat sleeps number 3.", "", "Der Hund", "Le chat dort number 12 " * 3]
    outputs, scores = translator(texts, return_scores=True)
    assert len(outputs) == len(scores) == 4 and all(isinstance(t, str) for t in outputs)
    batched, batched_scores = translator.translate(texts, batch_size=3)
    assert batched == outputs
    np.testing.assert_allclose(batched_scores, scores, atol=1e-4)
    signature = tf.TensorSpec([None], tf.string)
    serve = graph_function(translator.translate_tensors, input_signature=[signature])
    served = serve(tf.constant(texts))
    assert [t.decode() for t in served["translations"].numpy()] == outputs
    n_best = graph_function(
        lambda t: translator.translate_tensors_n_best(t, 3), input_signature=[signature]
    )(tf.constant(texts[:2]))
    assert n_best["translations"].shape == (2, 3) and n_best["scores"].shape == (2, 3)
    assert [t.decode() for t in n_best["translations"].numpy()[:, 0]] == outputs[:2]
    truncating = Translator(
        model, tokenizer, SearchOptions(max_extra_length=6), documents=DocumentOptions.sentences()
    )
    with caplog.at_level(logging.WARNING, logger="keras_transformer"):
        for _ in range(2):  # longer than max_length=64 pieces: one warning per Translator
            assert len(truncating(["number 7 " * 40])) == 1
        assert len(translator(["number 7 " * 40])) == 1  # split, not truncated: no warning
    assert sum("truncated" in r.getMessage() for r in caplog.records) == 1
    padded = SearchOptions(max_extra_length=6, padded_decode=True)
    xla = Translator(model, tokenizer, padded, jit_compile=True)
    assert xla(texts[:2]) == outputs[:2]
    assert xla(texts[:3]) == outputs[:3]  # 3 sentences, searched as 4 rows (pad_rows)
    # Sampling under XLA: the same buckets (a compile per bucket, not per batch size); greedy
    # draws nothing, so its rows must be the plain translator's, in order.
    shapes = []
    sample = xla.sample_function("greedy")
    xla._searches["sample_greedy"] = lambda source, *knobs: (
        shapes.append(tuple(source.shape)) or sample(source, *knobs)
    )  # fmt: skip
    three = tf.constant([texts[0], texts[2], "Le chat dort number 12"])  # 3 sentences
    greedy = xla.sample_tensors(three, "greedy")
    want = translator.sample_tensors(three, "greedy")
    assert greedy["translations"].numpy().tolist() == want["translations"].numpy().tolist()
    np.testing.assert_allclose(greedy["scores"], want["scores"], atol=1e-4)
    assert shapes and all(rows & (rows - 1) == 0 and width % 16 == 0 for rows, width in shapes)


def test_a_jit_translator_searches_batches_above_xla_max_rows_without_xla(model_dir):
    """A `jit_compile` translator's beam search: XLA over fixed buffers for batches of up to
    `XLA_MAX_ROWS` rows, the growing search for larger ones (XLA's buffers cost 3-5x at
    batch 64); either way the plain translator's translations and scores."""
    from keras_transformer.decoding.search import XLA_MAX_ROWS

    model, config, tokenizer = artifacts.load_trained(model_dir)
    _eos_prone(model, config)
    plain = Translator(model, tokenizer, SearchOptions(max_extra_length=6))
    padded = SearchOptions(max_extra_length=6, padded_decode=True)
    xla = Translator(model, tokenizer, padded, jit_compile=True)
    calls, functions = [], {}
    for key, growing in (("n_best_1", False), ("n_best_1_growing", True)):
        function = functions[key] = xla.search_function(1, growing)
        xla._searches[key] = lambda source, f=function, key=key: (
            calls.append((key, source.shape[0])) or f(source)
        )  # fmt: skip
    texts = [f"The cat sleeps number {n}" for n in range(XLA_MAX_ROWS + 3)]
    cases = [
        (XLA_MAX_ROWS, ("n_best_1", XLA_MAX_ROWS)),
        (XLA_MAX_ROWS - 1, ("n_best_1", XLA_MAX_ROWS)),  # rows padded to a power of two
        (XLA_MAX_ROWS + 1, ("n_best_1_growing", XLA_MAX_ROWS + 1)),
        (XLA_MAX_ROWS + 3, ("n_best_1_growing", XLA_MAX_ROWS + 3)),
    ]
    for rows, want_call in cases:
        calls.clear()
        got = xla.translate_tensors(tf.constant(texts[:rows]))  # eager: one branch runs
        assert calls == [want_call]
        want, scores = plain(texts[:rows], return_scores=True)
        assert [t.decode() for t in got["translations"].numpy()] == want
        np.testing.assert_allclose(got["scores"].numpy(), scores, atol=1e-4)
    growing = functions["n_best_1_growing"].get_concrete_function()
    assert growing.function_def.attr["_noinline"].b  # the untaken branch: one call node
    served = graph_function(
        xla.translate_tensors, input_signature=[tf.TensorSpec([None], tf.string)]
    )
    for rows in (2, XLA_MAX_ROWS + 3):  # traced: both branches in the graph, one runs
        got = served(tf.constant(texts[:rows]))["translations"].numpy()
        assert [t.decode() for t in got] == plain(texts[:rows])


def test_a_stored_output_kernel_is_the_embeddings_transpose_and_read_by_the_xla_search(
    model_dir,
):
    """`store_output_kernel`: a jit translator keeps `E^T` (NumPy's transpose of the
    embedding) in a variable, which its XLA searches read instead of transposing: the same
    translations and scores; no variable without XLA or with transposed kernels."""
    model, _, tokenizer = artifacts.load_trained(model_dir)
    padded = SearchOptions(max_extra_length=6, padded_decode=True)
    layout = dict(jit_compile=True, transpose_kernels=False)
    stock = Translator(model, tokenizer, padded, **layout)
    stored = Translator(model, tokenizer, padded, **layout, store_output_kernel=True)
    assert stock.output_kernel is None and not stored.output_kernel.trainable
    embedding = model.token_embedding.embeddings.numpy()  # (vocab, d_model)
    np.testing.assert_array_equal(stored.output_kernel.numpy(), embedding.T)
    texts = tf.constant(["The cat sleeps.", "A dog runs in the park number 3"])
    want, got = stock.translate_tensors(texts), stored.translate_tensors(texts)
    assert got["translations"].numpy().tolist() == want["translations"].numpy().tolist()
    np.testing.assert_allclose(got["scores"], want["scores"], atol=1e-5)
    stored.output_kernel.assign(tf.zeros_like(stored.output_kernel))  # read, not recomputed:
    uniform = stored.translate_tensors(texts)["scores"].numpy()  # every piece log(1 / vocab)
    assert np.all(np.abs(uniform - want["scores"].numpy()) > 1e-3)
    for kwargs in (dict(jit_compile=False), dict(jit_compile=True, transpose_kernels=True)):
        search = padded if kwargs["jit_compile"] else SearchOptions()
        other = Translator(model, tokenizer, search, **kwargs, store_output_kernel=True)
        assert other.output_kernel is None, kwargs
    memory, mask = model.encode(tf.constant([[5, 6, 3]]))
    with pytest.raises(ValueError, match=r"output_kernel of shape \(\d+, \d+\)"):
        fixed_shape_step(model, memory, mask, 8, True, output_kernel=stored.output_kernel)


def test_keras_file_round_trip_decodes_without_config(model, config, tmp_path):
    """A reloaded `.keras` file carries its TransformerConfig: decoding needs nothing else."""
    source = _sources(np.random.default_rng(11), [6, 3], config.vocab_size)
    search = SearchOptions(n_best=2, max_extra_length=5)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.config == config
    ids, scores = translate_ids(model, source, search)
    loaded_ids, loaded_scores = translate_ids(loaded, source, search)
    np.testing.assert_array_equal(loaded_ids.numpy(), ids.numpy())
    np.testing.assert_allclose(loaded_scores.numpy(), scores.numpy(), atol=1e-6)


@pytest.mark.parametrize("bisect", [False, True])
def test_filter_logits_with_tensor_knobs_matches_the_single_filters_and_numpy(bisect):
    from keras_transformer.decoding import filter_logits

    rng = np.random.default_rng(7)
    logits = tf.constant(rng.standard_normal((6, 30)).astype("f4"))
    knobs = graph_function(  # per-call tensors, under XLA
        lambda x, k, p: filter_logits(x, k, p, bisect), jit_compile=True
    )
    for k in (1, 4, 30, 50):
        got = knobs(logits, tf.constant(k), tf.constant(1.0))
        np.testing.assert_array_equal(got.numpy(), top_k_filter(logits, min(k, 30)).numpy())
    for p in (0.05, 0.5, 0.9):
        got = knobs(logits, tf.constant(0), tf.constant(p))
        np.testing.assert_array_equal(got.numpy(), top_p_filter(logits, p).numpy())
    off = knobs(logits, tf.constant(0), tf.constant(1.0))
    np.testing.assert_array_equal(off.numpy(), logits.numpy())
    both = np.isfinite(knobs(logits, tf.constant(5), tf.constant(0.6)).numpy())
    for row, values in enumerate(logits.numpy().astype("f8")):
        order = np.argsort(-values)[:5]  # top-5, then the nucleus renormalized over them
        probs = np.exp(values[order] - values[order].max())
        probs /= probs.sum()
        n = np.searchsorted(np.cumsum(probs), 0.6) + 1
        assert set(np.flatnonzero(both[row])) == set(order[:n])


@pytest.mark.parametrize("jit", [False, True])
def test_filter_logits_with_ties_infinities_and_signed_zeros_matches_the_sorting_filters(jit):
    # The bisection thresholds against the sort-based single filters (top_k_filter,
    # top_p_filter), on rows full of ties (small integers), -inf, -0.0 and 0.0, k from 1 to
    # past the vocabulary.
    from keras_transformer.decoding import filter_logits
    from keras_transformer.decoding.sampling import order_keys

    rng = np.random.default_rng(8)
    values = rng.integers(-3, 3, (8, 40)).astype("f4") * 0.5
    values[0, ::3], values[1, 5], values[2, :] = -np.inf, -0.0, 0.0
    logits = tf.constant(values)
    flat, keys = values.ravel(), order_keys(logits).numpy().ravel()
    ranked = flat[np.argsort(keys)]
    assert (ranked[1:] >= ranked[:-1]).all()  # the keys' order is the floats'
    np.testing.assert_array_equal(np.equal.outer(keys, keys), np.equal.outer(flat, flat))
    knobs = graph_function(lambda x, k, p: filter_logits(x, k, p, bisect=True), jit_compile=jit)
    for k in (1, 2, 7, 39, 40, 41):
        got = knobs(logits, tf.constant(k), tf.constant(1.0)).numpy()
        np.testing.assert_array_equal(got, top_k_filter(logits, min(k, 40)).numpy())
    for p in (0.01, 0.3, 0.77, 0.999):
        got = knobs(logits, tf.constant(0), tf.constant(p)).numpy()
        np.testing.assert_array_equal(got, top_p_filter(logits, p).numpy())


@pytest.fixture
def sampler(model_dir):
    model, config, tokenizer = artifacts.load_trained(model_dir)
    return Translator(_eos_prone(model, config), tokenizer, SearchOptions(max_extra_length=8))


SAMPLE_TEXTS = ["The cat sleeps number 3.", "", "Der Hund schläft.", "Le chat dort number 12."]


@pytest.mark.parametrize(
    "knobs",
    [dict(method="top_k", top_k=8), dict(method="top_p", top_p=0.9, temperature=1.5),
     dict(method="sample")],
    ids=["top_k", "top_p", "sample"],
)  # fmt: skip
def test_translator_sample_same_seed_same_output_other_seed_differs(sampler, knobs):
    first, scores = sampler.sample(SAMPLE_TEXTS, seed=11, batch_size=3, **knobs)
    again, again_scores = sampler.sample(SAMPLE_TEXTS, seed=11, batch_size=3, **knobs)
    assert again == first and again_scores == scores
    assert len(first) == len(SAMPLE_TEXTS) and all(isinstance(t, str) for t in first)
    others = [sampler.sample(SAMPLE_TEXTS, seed=s, batch_size=3, **knobs)[0] for s in (12, 13)]
    assert any(other != first for other in others)


def test_greedy_sampling_is_top_k_one_and_beam_one(sampler):
    greedy, greedy_scores = sampler.sample(SAMPLE_TEXTS, method="greedy")
    top1, top1_scores = sampler.sample(SAMPLE_TEXTS, method="sample", top_k=1, seed=5)
    assert top1 == greedy
    np.testing.assert_allclose(top1_scores, greedy_scores, atol=1e-6)
    search = SearchOptions(beam_size=1, alpha=0.0, max_extra_length=8)  # alpha 0: pure argmax
    plain = Translator(sampler.model, sampler.tokenizer, search)
    beam_out, beam_scores = plain(SAMPLE_TEXTS, return_scores=True)
    assert plain.sample(SAMPLE_TEXTS, method="greedy")[0] == beam_out == greedy
    np.testing.assert_allclose(plain.sample(SAMPLE_TEXTS, method="greedy")[1], beam_scores,
                               atol=1e-5)  # fmt: skip


def test_sample_tensors_checks_values_and_served_tensors(sampler):
    for bad in (dict(method="beam"), dict(temperature=0.0), dict(top_p=1.5), dict(top_k=-1)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            sampler.sample(SAMPLE_TEXTS, **bad)
    spec = [tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.float32)]
    served = graph_function(
        lambda t, temperature: sampler.sample_tensors(t, temperature=temperature),
        input_signature=spec,
    )
    assert served(tf.constant(SAMPLE_TEXTS), 0.7)["translations"].shape == [4]
    with pytest.raises(tf.errors.InvalidArgumentError, match="temperature must be > 0"):
        served(tf.constant(SAMPLE_TEXTS), 0.0)


def test_pad_rows_appends_copies_of_the_first_row_up_to_a_power_of_two():
    from keras_transformer.decoding.search import pad_rows

    for batch, want in ((0, 0), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (9, 16), (64, 64)):
        ids = tf.reshape(tf.range(batch * 3, dtype=tf.int32), [batch, 3])
        got = pad_rows(ids).numpy()
        assert got.shape == (want, 3), (batch, got.shape)
        np.testing.assert_array_equal(got[:batch], ids.numpy())
        np.testing.assert_array_equal(got[batch:], np.tile(ids.numpy()[:1], [want - batch, 1]))
    assert pad_rows(tf.zeros([1000, 2], tf.int32)).shape[0] == 1024


def test_pad_width_pads_columns_to_the_multiple_with_pad_ids():
    from keras_transformer.constants import PAD_ID
    from keras_transformer.decoding.search import pad_width

    for width, want in ((1, 16), (16, 16), (17, 32), (0, 0)):
        ids = tf.ones([2, width], tf.int32) * 7
        got = pad_width(ids, 16).numpy()
        assert got.shape == (2, want)
        np.testing.assert_array_equal(got[:, :width], 7)
        np.testing.assert_array_equal(got[:, width:], PAD_ID)
    ragged = tf.ragged.constant([[5, 6, 7], [8]], dtype=tf.int32)
    np.testing.assert_array_equal(pad_width(ragged, 4), [[5, 6, 7, PAD_ID], [8] + [PAD_ID] * 3])
