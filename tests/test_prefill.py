"""The target prefix run through the decoder once (decoding/prefill.py): the guided search with
the prefill returns the ids and scores of the search that forces every prefix piece by a loop
step, with growing (slot cache) and fixed buffers, in batches that mix no prefix, short and
long prefixes, and it runs P fewer loop steps."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import SearchOptions
from keras_transformer.artifacts import load_trained
from keras_transformer.decoding.constraints import Guide, GuidedBeamSearch
from keras_transformer.decoding.incremental import fixed_shape_step, per_source_step
from keras_transformer.decoding.loop import LoopOptions, decode
from keras_transformer.decoding.prefill import Prefill, fill_cache, shortest_prefix

SOURCES = [[5, 6, 7, 8, 3], [9, 10, 3, 0, 0], [11, 12, 13, 3, 0], [14, 3, 0, 0, 0]]
BATCHES = {  # name: (prefixes, constraints, avoid) of the four sources
    "one without prefix": (
        [[], [20, 21], [22, 23, 24, 25, 26, 27], [30]],
        [[[]], [[40, 41]], [[23, 24]], [[50]]],
        [[[5, 6]], [[7]], [[]], [[]]],
    ),
    "short and long": (  # shortest 2: the prefill, then up to 4 forced loop steps
        [[20, 21, 22], [20, 21], [22, 23, 24, 25, 26, 27], [30, 31]],
        [[[]], [[21, 40]], [[23, 24]], [[50, 51]]],  # 23 24: met inside the prefix
        [[[21, 22]], [[7]], [[]], [[31, 9]]],
    ),
}
MAX_LEN = 10


@pytest.fixture(scope="module")
def model(one_layer_model_dir):
    return load_trained(one_layer_model_dir)[0]


def search(model, batch, padded: bool, prefill: bool):
    """`(ids, scores, loop steps run)` of the guided search of `SOURCES` with `BATCHES[batch]`,
    eagerly."""
    calls = tf.Variable(0)
    ids, scores = guided_search(model, batch, padded, prefill, calls)
    return ids.numpy(), scores.numpy(), int(calls.numpy())


def guided_search(model, batch, padded: bool, prefill: bool, calls: tf.Variable):
    prefixes, constraints, avoid = BATCHES[batch]
    source = tf.constant(SOURCES)
    guide = Guide.build(len(SOURCES), model.config.vocab_size,
                        prefix_ids=tf.ragged.constant(prefixes),
                        constraints=tf.ragged.constant(constraints),
                        avoid=tf.ragged.constant(avoid))  # fmt: skip
    memory, mask = model.encode(source)
    options = SearchOptions(beam_size=3)
    if padded:
        step = fixed_shape_step(model, memory, mask, MAX_LEN)
    else:
        step = per_source_step(model, memory, mask, options.beam_size)
    start, filled = None, None
    if prefill:
        start = shortest_prefix(guide.prefix_lengths)
        step, log_probs = fill_cache(model, step, guide.prefix_ids[:, :start], 2)
        filled = Prefill(start, log_probs)

    def counted(ids, at, cache, shared):
        calls.assign_add(1)
        return step.fn(ids, at, cache, shared)

    strategy = GuidedBeamSearch(model.config.vocab_size, options, guide, prefill=filled)
    bos = tf.fill([len(SOURCES)], 2)
    return decode(strategy, step._replace(fn=counted), bos, MAX_LEN,
                         LoopOptions(padded=padded, shrink_threshold=1.0),
                         max_lengths=tf.constant([MAX_LEN, 9, 8, MAX_LEN]),
                  start_step=start)  # fmt: skip


CASES = [  # (batch, padded): the production design in the default stage, the rest slow
    ("short and long", False),
    pytest.param("short and long", True, marks=pytest.mark.slow),
    pytest.param("one without prefix", False, marks=pytest.mark.slow),
    pytest.param("one without prefix", True, marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("batch", "padded"), CASES)
def test_prefill_equals_forcing_every_piece_by_a_step(model, batch, padded):
    stepwise_ids, stepwise_scores, stepwise_calls = search(model, batch, padded, prefill=False)
    ids, scores, calls = search(model, batch, padded, prefill=True)
    np.testing.assert_array_equal(ids, stepwise_ids)
    np.testing.assert_allclose(scores, stepwise_scores, rtol=1e-5, atol=1e-5)
    assert np.all(np.isfinite(scores))
    shortest = min(len(p) for p in BATCHES[batch][0])
    assert calls == stepwise_calls - shortest  # the shortest prefix took no loop step
    for row, prefix in zip(ids[:, 0], BATCHES[batch][0]):  # the prefix is kept
        assert list(row[1 : 1 + len(prefix)]) == prefix
