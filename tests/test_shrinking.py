"""Shrinking decoding: dropping finished items' rows (growing buffers) changes no id and no
score. The references never drop a row: `shrink_threshold=1.0`, and the fixed-size design.

A toy step function whose items end at very different steps (some at step 2, others only at
their length limit) reads per-hypothesis state from its cache and per-item state from
`shared`, so a misordered or misaligned row changes the logits. Eagerly, it records the rows
it sees per step, which must fall as items finish."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import SearchOptions, TransformerConfig, build_transformer
from keras_transformer.decoding import (
    BeamSearch,
    LoopOptions,
    Sampling,
    SamplingOptions,
    decode,
    fixed_shape_step,
    per_source_step,
)
from keras_transformer.testing.steps import row_step
from keras_transformer.tracing import graph_function

BOS, PAD = 0, -1
VOCAB, EOS, MAX_LEN = 7, 6, 12
EARLY = (0, 3, 4)  # items that end at step 2; the others never emit EOS
LIMITS = [12, 9, 12, 7, 12, 11]


class MixedLengths:
    """Random logits by (item, last token, step) plus the running sum of the prefix (kept in
    the per-hypothesis cache); the item index and its EOS bias per step live in `shared`."""

    def __init__(self, seed=0):
        batch = len(LIMITS)
        rng = np.random.default_rng(seed)
        self.batch = batch
        self.by_last = rng.standard_normal((batch, VOCAB, MAX_LEN + 1, VOCAB)).astype("f4")
        eos_bias = np.full((batch, MAX_LEN + 1), -1e4, "f4")  # EOS impossible ...
        eos_bias[list(EARLY), 1:] = 20.0  # ... but certain from step 1 for the early items
        self.eos_bias = eos_bias
        self.rows_seen = []  # eager calls: rows per step

    def shared(self):
        return {
            "item": tf.range(self.batch),  # (batch,)
            "eos_bias": tf.constant(self.eos_bias),  # (batch, max_len + 1)
        }

    def fn(self, ids, step, cache, shared):
        self.rows_seen.append(int(ids.shape[0]) if tf.executing_eagerly() else None)
        token = tf.maximum(tf.gather(ids, tf.reshape(step, [1]), axis=1)[:, 0], 0)  # (rows,)
        total = cache["total"] + token  # (rows,)
        steps = tf.fill(tf.shape(token), step)
        logits = tf.gather_nd(self.by_last, tf.stack([shared["item"], token, steps], -1))
        logits += 0.5 * tf.one_hot(total % VOCAB, VOCAB)  # depends on the whole prefix
        eos = tf.gather(shared["eos_bias"], step, axis=1)  # (rows,)
        logits += eos[:, None] * tf.one_hot(EOS, VOCAB)
        return logits, {"total": total}

    def initial_cache(self):
        return {"total": tf.zeros([self.batch], tf.int32)}


NEVER = 1.0  # a shrink_threshold that never drops a row


def _beam(toy, threshold, mode="graph", beam=3, padded=False, **kwargs):
    def run():
        loop = LoopOptions(EOS, PAD, padded=padded, shrink_threshold=threshold)
        step = row_step(toy.fn, toy.initial_cache(), toy.shared(), beam, padded)
        return decode(
            BeamSearch(VOCAB, SearchOptions(beam_size=beam, alpha=0.6, **kwargs)), step,
            tf.fill([toy.batch], BOS), MAX_LEN, loop, max_lengths=tf.constant(LIMITS),
        )  # fmt: skip

    ids, scores = run() if mode == "eager" else graph_function(run)()
    return ids.numpy(), scores.numpy()


@pytest.mark.parametrize(
    "n_best,stop_early,threshold", [(1, True, 0.25), (3, True, 0.0), (2, False, 0.5)]
)
def test_beam_search_shrinking_changes_nothing(n_best, stop_early, threshold):
    toy = MixedLengths()
    kwargs = dict(n_best=n_best, stop_early=stop_early)
    want_ids, want_scores = _beam(toy, NEVER, **kwargs)
    ids, scores = _beam(toy, threshold, **kwargs)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(scores, want_scores)
    pad_ids, pad_scores = _beam(toy, threshold, padded=True, **kwargs)  # drops nothing
    np.testing.assert_array_equal(pad_ids[:, :, : ids.shape[2]], ids)
    np.testing.assert_allclose(pad_scores, scores, rtol=1e-6)
    lengths = (ids[:, 0, 1:] != PAD).sum(-1)  # (batch,)
    assert all(lengths[item] == 2 for item in EARLY) and ids.shape[2] == max(LIMITS) + 1


def test_beam_search_rows_fall_as_items_finish():
    beam = 2
    toy = MixedLengths()
    want_ids, want_scores = _beam(toy, NEVER, mode="eager", beam=beam)
    assert toy.rows_seen == [len(LIMITS) * beam] * max(LIMITS)  # no drop: all rows, always
    toy.rows_seen.clear()
    ids, scores = _beam(toy, 0.0, mode="eager", beam=beam)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(scores, want_scores)
    # After step 2 the early items are gone; then the others leave at their limits 7, 9, 11.
    live = [6] * 2 + [3] * 7 + [2] * 2 + [1]
    assert toy.rows_seen == [n * beam for n in live]


def test_shrink_threshold_is_a_fraction():
    with pytest.raises(ValueError, match="shrink_threshold"):
        _beam(MixedLengths(), 1.5)


GREEDY = dict(method="greedy")
TOP_K = dict(method="sample", top_k=3, temperature=1.5)
TOP_P = dict(method="top_p", top_p=0.9)


@pytest.mark.parametrize(
    "knobs,mode", [(GREEDY, "eager"), (TOP_K, "eager"), (TOP_P, "eager"), (TOP_K, "graph")]
)
def test_sampling_shrinking_changes_nothing(knobs, mode):
    toy = MixedLengths(seed=1)

    def run(threshold):
        def run_sampling():
            return decode(
                Sampling(SamplingOptions(seed=(3, 4), **knobs)),
                row_step(toy.fn, toy.initial_cache(), toy.shared()),
                tf.fill([toy.batch], BOS), MAX_LEN,
                LoopOptions(EOS, PAD, shrink_threshold=threshold), max_lengths=tf.constant(LIMITS),
            )  # fmt: skip

        toy.rows_seen.clear()
        ids, log_probs = run_sampling() if mode == "eager" else graph_function(run_sampling)()
        return ids.numpy(), log_probs.numpy()

    want_ids, want_log_probs = run(NEVER)
    ids, log_probs = run(0.0)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(log_probs, want_log_probs)
    assert all((ids[item, 1:] != PAD).sum() == 2 for item in EARLY)
    if mode == "eager":
        assert toy.rows_seen == [6] * 2 + [3] * 7 + [2] * 2 + [1]


@pytest.fixture(scope="module")
def model():
    config = TransformerConfig.tiny(
        48, num_layers=2, d_model=32, d_ff=64, num_heads=4, dropout=0.0, max_length=40
    )
    keras.utils.set_random_seed(1)
    model = build_transformer(config)
    eos = model.token_embedding.embeddings.numpy()[config.eos_id]  # end at varied lengths
    model.decoder.layers[-1].feed_forward_norm.beta.assign(1.5 * eos / np.linalg.norm(eos))
    return model


def _sources(model, lengths):
    config, rng = model.config, np.random.default_rng(0)
    ids = np.zeros((len(lengths), max(lengths)), np.int32)
    for row, n in enumerate(lengths):
        ids[row, : n - 1] = rng.integers(4, config.vocab_size, n - 1)
        ids[row, n - 1] = config.eos_id
    return tf.constant(ids)


LENGTHS = [3, 25, 1, 12, 2, 18]


def test_model_search_matches_the_fixed_shape_design(model):
    """The production design (per-source cache, rows dropped at every finish) against the
    fixed-size one (a row per hypothesis, reordered by gather, nothing dropped)."""
    config, source = model.config, _sources(model, LENGTHS)
    beam, n_best = 3, 2

    @tf.function
    def search(padded):
        memory, mask = model.encode(source)
        limits = tf.minimum(tf.reduce_sum(tf.cast(source != 0, tf.int32), 1) + 8, 30)
        options = SearchOptions(beam_size=beam, alpha=0.6, n_best=n_best)
        strategy = BeamSearch(config.vocab_size, options)
        bos = tf.fill([len(LENGTHS)], config.bos_id)
        loop = LoopOptions(config.eos_id, config.pad_id, padded=padded, shrink_threshold=0.0)
        if padded:
            step = fixed_shape_step(model, memory, mask, 30)
        else:
            step = per_source_step(model, memory, mask, beam)
        return decode(strategy, step, bos, 30, loop, max_lengths=limits)

    want_ids, want_scores = search(True)
    ids, scores = search(False)
    ids, want_ids = ids.numpy(), want_ids.numpy()
    np.testing.assert_array_equal(ids, want_ids[:, :, : ids.shape[2]])
    assert np.all(want_ids[:, :, ids.shape[2] :] == config.pad_id)
    np.testing.assert_allclose(scores.numpy(), want_scores.numpy(), atol=1e-4)
    lengths = (ids[:, 0, 1:] != config.pad_id).sum(-1)
    assert lengths.min() < lengths.max() - 5  # lengths really differ
