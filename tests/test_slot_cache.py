"""The per-source beam cache that is never reordered (`decoding.slot_cache`,
`decoding.incremental.per_source_step`), checked against independent references: the
uncached decoder over each hypothesis' whole prefix, the fixed-shape design (a row per
hypothesis, reordered by gather), and NumPy for the ancestor mask."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import SearchOptions, TransformerConfig, build_transformer
from keras_transformer.decoding import (
    BeamSearch,
    LoopOptions,
    Sampling,
    decode,
    fixed_shape_step,
    per_source_step,
    slot_cache,
)
from keras_transformer.decoding.loop import StepFunction
from keras_transformer.tracing import graph_function

VOCAB, ITEMS, SRC_LEN = 40, 3, 6


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(3)
    return build_transformer(TransformerConfig.tiny(VOCAB, dropout=0.0))


@pytest.fixture(scope="module")
def source():
    rng = np.random.default_rng(0)
    ids = rng.integers(4, VOCAB, (ITEMS, SRC_LEN)).astype("int32")
    ids[1, 4:] = 0  # padding: the memory mask matters
    return tf.constant(ids)


def test_ancestor_mask_matches_numpy():
    rng = np.random.default_rng(1)
    items, positions, beam = 2, 5, 3
    slots = rng.integers(0, beam, (items, positions, beam)).astype("int32")
    got = np.asarray(slot_cache.ancestor_mask(tf.constant(slots), beam))
    want = np.zeros((items, beam, positions * beam), bool)
    for i in range(items):
        for q in range(beam):
            for s in range(positions):
                want[i, q, s * beam + slots[i, s, q]] = True
    np.testing.assert_array_equal(got, want)


def test_step_logits_match_the_uncached_decoder_under_random_reorders(model, source):
    """Reorder beams at random every step (as a search would) and compare each row's logits
    with the decoder re-run over that row's whole prefix (no cache at all). The recent part
    is merged at steps 3 and 6, so both parts, and each alone, are read."""
    beam, steps = 3, 7
    rng = np.random.default_rng(2)
    memory, mask = model.encode(source)
    step = per_source_step(model, memory, mask, beam, recent_positions=3)
    prefixes = np.full((ITEMS * beam, 1), model.config.bos_id, "int32")  # rows' hypotheses
    cache = step.cache
    for t in range(steps):
        logits, cache = step.fn(tf.constant(prefixes), tf.constant(t), cache, step.shared)
        tiled_memory = tf.repeat(memory, beam, axis=0)
        tiled_mask = tf.repeat(mask, beam, axis=0)
        hidden = model.decoder(
            model.token_embedding(tf.constant(prefixes)), tiled_memory, memory_mask=tiled_mask
        )
        want = model.token_embedding(hidden[:, -1:], reverse=True)[:, 0]
        np.testing.assert_allclose(np.asarray(logits), np.asarray(want), atol=2e-4, rtol=1e-4)
        parents = rng.integers(0, beam, (ITEMS, beam)).astype("int32")  # within each item
        cache = step.reorder_cache(cache, tf.constant(parents))
        rows = (np.arange(ITEMS)[:, None] * beam + parents).reshape(-1)
        tokens = rng.integers(4, VOCAB, (ITEMS * beam, 1)).astype("int32")
        prefixes = np.concatenate([prefixes[rows], tokens], axis=1)


def _search(model, source, strategy, padded, graph, recent_positions=4):
    """`(ids, scores)`; with `padded` (the fixed-shape design) the ids are cut to the width
    of the growing design's and the rest checked to be padding."""
    memory, mask = model.encode(source)
    config = model.config
    bos = tf.fill([ITEMS], config.bos_id)
    limits = tf.constant([9, 4, 12])  # items end at different steps: rows are dropped
    loop = LoopOptions(config.eos_id, config.pad_id, padded=padded)

    def run():
        if padded:
            step = fixed_shape_step(model, memory, mask, 12)
        else:
            step = per_source_step(model, memory, mask, strategy.rows_per_item, recent_positions)
        return decode(strategy, step, bos, 12, loop, max_lengths=limits)

    ids, scores = (graph_function(run) if graph else run)()
    return np.asarray(ids), np.asarray(scores)


def _assert_same_search(got, want, pad_id):
    (ids, scores), (want_ids, want_scores) = got, want
    width = ids.shape[-1]
    np.testing.assert_array_equal(ids, want_ids[..., :width])
    assert np.all(want_ids[..., width:] == pad_id)
    np.testing.assert_allclose(scores, want_scores, atol=1e-4)


@pytest.mark.parametrize(("beam", "graph"), [(2, False), (4, True)])
def test_beam_search_equals_the_fixed_shape_design(model, source, beam, graph):
    strategy = BeamSearch(VOCAB, SearchOptions(beam_size=beam, n_best=min(2, beam)))
    want = _search(model, source, strategy, padded=True, graph=graph)
    got = _search(model, source, strategy, padded=False, graph=graph)  # merges in 12 steps
    _assert_same_search(got, want, model.config.pad_id)


def test_greedy_sampling_equals_the_fixed_shape_design(model, source):
    want = _search(model, source, Sampling(), padded=True, graph=True)
    got = _search(model, source, Sampling(), padded=False, graph=True)
    _assert_same_search(got, want, model.config.pad_id)


def test_a_design_and_its_buffers_must_agree(model, source):
    memory, mask = model.encode(source)
    beam = BeamSearch(VOCAB, SearchOptions(beam_size=2))
    step = per_source_step(model, memory, mask, 2)
    bos = tf.zeros([ITEMS], tf.int32)
    with pytest.raises(ValueError, match="padded=True"):
        decode(beam, step, bos, 5, LoopOptions(padded=True))
    with pytest.raises(ValueError, match="reorder_cache=None"):
        decode(beam, StepFunction(step.fn, step.cache, step.shared), bos, 5, LoopOptions())


def test_merge_recent_moves_the_recent_part_once_full():
    names = ("key", "value", "recent_key", "recent_value")
    cache = {name: tf.zeros([2, 2, 0, 3, 4]) for name in names}
    for t in range(5):
        new = tf.fill([2, 2, 1, 3, 4], float(t))
        (cache,) = slot_cache.merge_recent([slot_cache.append(cache, new, new)], 2)
        older, newer = cache["key"].shape[2], cache["recent_key"].shape[2]
        assert (older, newer) == (2 * ((t + 1) // 2), (t + 1) % 2)
    positions = tf.concat([cache["key"], cache["recent_key"]], axis=2)[0, 0, :, 0, 0]
    np.testing.assert_array_equal(np.asarray(positions), np.arange(5, dtype="float32"))


def test_pretransposed_output_kernel_gives_the_same_logits(model):
    hidden = keras.random.normal((2, 3, model.config.d_model), seed=1)
    embedding = model.token_embedding
    want = embedding(hidden, reverse=True)
    got = embedding(hidden, reverse=True, output_kernel=embedding.output_kernel())
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)
