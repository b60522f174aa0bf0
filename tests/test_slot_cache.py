"""The per-source beam cache that is never reordered (`layers.slot_cache`,
`decoding.incremental.per_item_decoder`), checked against independent references: the
uncached decoder over each hypothesis' whole prefix, the row cache reordered by gather, and
NumPy for the ancestor mask."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import SearchOptions, TransformerConfig, build_transformer
from keras_transformer.decoding import BeamSearch, LoopOptions, Sampling, decode, incremental
from keras_transformer.decoding.incremental import (
    incremental_decoder_with_shared,
    per_item_decoder,
    reorder_slots,
)
from keras_transformer.layers import slot_cache

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


@pytest.fixture
def recent(request):
    """Set `incremental.RECENT_POSITIONS` for one test (merges happen within a short run)."""
    yield lambda n: setattr(incremental, "RECENT_POSITIONS", n)
    incremental.RECENT_POSITIONS = incremental.DEFAULT_RECENT_POSITIONS


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


def test_step_logits_match_the_uncached_decoder_under_random_reorders(model, source, recent):
    """Reorder beams at random every step (as a search would) and compare each row's logits
    with the decoder re-run over that row's whole prefix (no cache at all). The recent part
    is merged at steps 3 and 6, so both parts, and each alone, are read."""
    recent(3)
    beam, steps = 3, 7
    rng = np.random.default_rng(2)
    memory, mask = model.encode(source)
    step = per_item_decoder(model, memory, mask, beam)
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
        cache = reorder_slots(cache, tf.constant(parents))
        rows = (np.arange(ITEMS)[:, None] * beam + parents).reshape(-1)
        tokens = rng.integers(4, VOCAB, (ITEMS * beam, 1)).astype("int32")
        prefixes = np.concatenate([prefixes[rows], tokens], axis=1)


def _search(model, source, strategy, per_item, graph):
    memory, mask = model.encode(source)
    config = model.config
    bos = tf.fill([ITEMS], config.bos_id)
    limits = tf.constant([9, 4, 12])  # items end at different steps: rows are dropped
    loop = LoopOptions(config.eos_id, config.pad_id)

    def run():
        if per_item:
            step = per_item_decoder(model, memory, mask, strategy.rows_per_item)
            return decode(strategy, step.fn, bos, step.cache, 12, loop, max_lengths=limits,
                          shared=step.shared, reorder_cache=step.reorder_cache)  # fmt: skip
        fn, cache, shared = incremental_decoder_with_shared(model, memory, mask)
        return decode(strategy, fn, bos, cache, 12, loop, max_lengths=limits, shared=shared)

    ids, scores = (tf.function(run) if graph else run)()
    return np.asarray(ids), np.asarray(scores)


@pytest.mark.parametrize(("beam", "graph"), [(2, False), (4, True)])
def test_beam_search_equals_the_row_cache_reordered_by_gather(model, source, recent, beam, graph):
    recent(4)  # merges within the 12 steps
    strategy = BeamSearch(VOCAB, SearchOptions(beam_size=beam, n_best=min(2, beam)))
    want_ids, want_scores = _search(model, source, strategy, per_item=False, graph=graph)
    ids, scores = _search(model, source, strategy, per_item=True, graph=graph)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(scores, want_scores, atol=1e-4)


def test_greedy_sampling_equals_the_row_cache(model, source):
    want = _search(model, source, Sampling(), per_item=False, graph=True)
    got = _search(model, source, Sampling(), per_item=True, graph=True)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], atol=1e-4)


def test_reorder_cache_refuses_padded_buffers(model, source):
    memory, mask = model.encode(source)
    step = per_item_decoder(model, memory, mask, 2)
    with pytest.raises(ValueError, match="padded=False"):
        decode(BeamSearch(VOCAB, SearchOptions(beam_size=2)), step.fn, tf.zeros([ITEMS], tf.int32),
               step.cache, 5, LoopOptions(padded=True), shared=step.shared,
               reorder_cache=step.reorder_cache)  # fmt: skip


def test_merge_recent_moves_the_recent_part_once_full():
    names = ("key", "value", "recent_key", "recent_value")
    cache = {name: tf.zeros([2, 2, 0, 3, 4]) for name in names}
    for t in range(5):
        new = tf.fill([2, 2, 1, 3, 4], float(t))
        (cache,) = incremental.merge_recent([slot_cache.append(cache, new, new)], 2)
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
