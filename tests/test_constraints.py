"""Guided beam search (prefix, alternatives, avoid, constraints) on hand-written probability
tables, against exhaustive search over the outputs the guide allows."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import SearchOptions
from keras_transformer.decoding import BeamSearch, LoopOptions, decode
from keras_transformer.decoding.constraints import Guide, GuidedBeamSearch, phrases_met
from keras_transformer.testing.steps import row_step, stateless_step
from keras_transformer.testing.tables import BOS, PAD, Table, strip
from keras_transformer.tracing import graph_function

VOCAB, MAX_LEN, EOS = 4, 3, 3
WIDE = (VOCAB - 1) ** (MAX_LEN - 1) * VOCAB  # every live hypothesis fits in the beam


def contains(tokens, phrase):
    return any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens)))


def allowed(tokens, guide, item, table, alpha):
    """Whether the guide lets `tokens` out (prefix, first free token, alternative, avoid)."""
    prefix = guide["prefix"][item]
    if tokens[: len(prefix)] != prefix or len(tokens) == len(prefix):
        return False
    first = tokens[len(prefix)]
    choices = guide.get("first", [None] * 2)[item]
    if choices is not None and first not in choices:
        return False
    rank = guide.get("alternative", [-1, -1])[item]
    if rank >= 0:
        log_probs = table.log_probs(item, [BOS] + prefix)
        ok = [t for t in np.argsort(-log_probs, kind="stable") if choices is None or t in choices]
        if first != ok[rank]:
            return False
    for phrase in guide.get("avoid", [[], []])[item]:  # never completed after the prefix
        for end in range(len(prefix), len(tokens)):
            if end + 1 >= len(phrase) and tokens[end + 1 - len(phrase) : end + 1] == phrase:
                return False
    return True


def expected_ranking(table, guide, item, limit, alpha):
    hypotheses = [
        (score, tokens)
        for score, tokens in table.hypotheses(item, limit, alpha, EOS)
        if allowed(tokens, guide, item, table, alpha)
    ]
    wanted = guide.get("constraints", [[], []])[item]
    met = lambda tokens: all(contains(tokens, p) for p in wanted)  # noqa: E731
    return sorted(hypotheses, key=lambda h: (not met(h[1]), -h[0]))


def ragged(rows):
    return tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=len(np.shape(rows)) and None)


def build_guide(guide, batch):
    def phrases(name):
        rows = guide.get(name, [[]] * batch)
        width = max([len(p) for row in rows for p in row] + [1])
        count = max([len(row) for row in rows] + [1])
        table = np.full((batch, count, width), -1, np.int32)
        for b, row in enumerate(rows):
            for c, phrase in enumerate(row):
                table[b, c, : len(phrase)] = phrase
        return table

    width = max(len(p) for p in guide["prefix"]) or 1
    prefix = np.full((batch, width), -1, np.int32)
    for b, p in enumerate(guide["prefix"]):
        prefix[b, : len(p)] = p
    first = np.ones((batch, VOCAB), bool)
    for b, choices in enumerate(guide.get("first", [None] * batch)):
        if choices is not None:
            first[b] = np.isin(np.arange(VOCAB), choices)
    return Guide.build(
        batch, VOCAB, prefix_ids=prefix, first_allowed=first,
        alternative=guide.get("alternative"), avoid=phrases("avoid"),
        constraints=phrases("constraints"),
    )  # fmt: skip


def search(table, guide, batch, beam, alpha, limits, n_best):
    options = SearchOptions(beam_size=beam, alpha=alpha, n_best=n_best)
    strategy = GuidedBeamSearch(VOCAB, options, build_guide(guide, batch))
    step = row_step(table.fn(), table.initial_cache(batch), (), beam)
    run = graph_function(
        lambda: decode(
            strategy,
            step,
            tf.fill([batch], BOS),
            MAX_LEN,
            LoopOptions(EOS, PAD),
            max_lengths=tf.constant(limits),
        )  # fmt: skip
    )
    ids, scores = run()
    return ids.numpy(), scores.numpy()


GUIDES = {
    "none": {"prefix": [[], []]},
    "prefix": {"prefix": [[1], [2, 0]], "first": [[0, 2], None]},
    "mixed prefix": {"prefix": [[], [1]], "first": [None, [0, 1, 2]]},
    "alternative": {"prefix": [[1], []], "alternative": [1, 2]},
    "avoid": {"prefix": [[], []], "avoid": [[[1, 2], [0]], [[2]]]},
    "constraints": {"prefix": [[], []], "constraints": [[[2, 2]], [[1], [0]]]},
    "all": {
        "prefix": [[1], []],
        "first": [[0, 2], None],
        "avoid": [[[0, 0]], [[2, 1]]],
        "constraints": [[[2]], [[0, 1]]],
    },
}


SLOW = pytest.mark.slow  # each case traces its own search (about 3 s)
CASES = [("all", 0.6)] + [
    pytest.param(name, alpha, marks=SLOW)
    for name, alpha in [(n, 0.6) for n in sorted(GUIDES) if n != "all"] + [("all", 0.0)]
]


@pytest.mark.parametrize("name,alpha", CASES)
def test_wide_guided_search_matches_exhaustive_ranking(name, alpha):
    # A beam that holds every live hypothesis prunes nothing: the guided search must return
    # the exhaustive ranking of the outputs the guide allows, those meeting every constraint
    # first, with their exact ids and scores.
    guide, batch, n_best = GUIDES[name], 2, 6
    limits = [MAX_LEN, MAX_LEN - 1] if name != "prefix" else [MAX_LEN, MAX_LEN]
    table = Table(seed=len(name) * 7 + int(alpha * 10), batch=batch, vocab=VOCAB, max_len=MAX_LEN)
    ids, scores = search(table, guide, batch, WIDE, alpha, limits, n_best)
    for item in range(batch):
        expected = expected_ranking(table, guide, item, limits[item], alpha)[:n_best]
        got = [strip(row, EOS) for row in ids[item]][: len(expected)]
        assert got == [tokens for _, tokens in expected]
        np.testing.assert_allclose(scores[item, : len(expected)], [s for s, _ in expected],
                                   rtol=1e-5)  # fmt: skip
        assert np.all(np.isneginf(scores[item, len(expected) :]))


def _hand_table(beam):
    # vocab: 0 = BOS / filler, 1, 2, 3 = EOS, 4 = a rare word, 5 = another.
    # after BOS: 1 (0.6), 2 (0.35), 4 (0.04), 5 (0.01); after 1 or 2: EOS (0.9), 4 (0.05);
    # after 4: 5 (0.8), EOS (0.2); after 5: EOS.
    probs = np.full((6, 6), 1e-6)
    probs[0] = [1e-6, 0.6, 0.35, 1e-6, 0.04, 0.01]
    probs[1] = probs[2] = [0.02, 0.02, 0.01, 0.9, 0.05, 1e-6]
    probs[4] = [1e-6, 1e-6, 1e-6, 0.2, 1e-6, 0.8]
    probs[5] = [1e-6, 1e-6, 1e-6, 0.999, 1e-6, 1e-6]
    probs[3] = 1.0 / 6
    probs /= probs.sum(1, keepdims=True)
    table = tf.constant(np.log(probs), tf.float32)
    return probs, stateless_step(lambda ids, step: tf.gather(table, ids[:, -1]), beam)


def _guided(constraints, avoid=None, limit=6, beam=2, boundary=None):
    probs, step = _hand_table(beam)
    guide = Guide.build(
        1,
        6,
        constraints=tf.constant([constraints], tf.int32),
        avoid=None if avoid is None else tf.constant([avoid], tf.int32),
    )
    strategy = GuidedBeamSearch(6, SearchOptions(beam_size=beam, alpha=0.0), guide, boundary)
    ids, scores = decode(strategy, step, tf.constant([BOS]), limit, LoopOptions(eos_id=3))
    return probs, ids.numpy()[0, 0], scores.numpy()[0, 0]


def test_allocation_meets_constraints_plain_beam_misses():
    # Plain beam 2 keeps [1], [2] and ends with [1, EOS]. With the constraint [5], beam 2
    # shares its two beams between banks: step 1 keeps [5] (bank 1) and [1] (bank 0); step 2
    # finishes [5, EOS] (p 0.00999) and keeps [1, 5] (bank 1) and [1, 4] (bank 0); then
    # [1, 4, 5, EOS] (p 0.024) wins. Beam 4 also keeps [4] at step 1 and finds the best
    # output with a 5, [4, 5, EOS] (p 0.032).
    _, step = _hand_table(2)
    plain, _ = decode(BeamSearch(6, SearchOptions(beam_size=2, alpha=0.0)), step,
                      tf.constant([BOS]), 6, LoopOptions(eos_id=3))  # fmt: skip
    assert plain.numpy()[0, 0, :3].tolist() == [BOS, 1, 3]
    probs, ids, score = _guided([[5]])
    assert ids[:5].tolist() == [BOS, 1, 4, 5, 3]
    expected = probs[0, 1] * probs[1, 4] * probs[4, 5] * probs[5, 3]
    np.testing.assert_allclose(score, np.log(expected), rtol=1e-5)
    probs, ids, score = _guided([[5]], beam=4)
    assert ids[:4].tolist() == [BOS, 4, 5, 3]
    np.testing.assert_allclose(score, np.log(probs[0, 4] * probs[4, 5] * probs[5, 3]), rtol=1e-5)
    # Two phrases, [2] and [4, 5]: [2, 4, 5, EOS] holds both.
    _, ids, _ = _guided([[2, -1], [4, 5]])
    assert ids[:5].tolist() == [BOS, 2, 4, 5, 3]


def test_a_met_phrase_ends_its_word():
    # Token 5 continues a word: after the constraint [4] it is blocked. Beam 2 finishes
    # [4, EOS] (p 0.04 * 0.2) and [1, 4, EOS] (p 0.6 * 0.05 * 0.2, less); without the boundary
    # rule [4, 5, EOS] would win.
    boundary = tf.constant([True, True, True, True, True, False])
    probs, ids, score = _guided([[4]], boundary=boundary)
    assert ids[:3].tolist() == [BOS, 4, 3]
    np.testing.assert_allclose(score, np.log(probs[0, 4] * probs[4, 3]), rtol=1e-5)
    assert _guided([[4]])[1][:4].tolist() == [BOS, 4, 5, 3]


def test_impossible_constraint_still_answers():
    # Avoiding 5 makes the constraint [5] impossible: the search still returns its best
    # output, which lacks the phrase, and phrases_met says so.
    _, ids, score = _guided([[5]], avoid=[[5]])
    assert np.isfinite(score) and 5 not in ids.tolist()
    assert ids[:3].tolist() == [BOS, 1, 3]
    met = phrases_met(tf.constant([ids[1:]]), tf.constant([[[5]]]))
    assert met.numpy().tolist() == [False]
    # A phrase longer than the length limit cannot fit either.
    _, ids, score = _guided([[4, 5, 5, 5]], limit=3)
    assert np.isfinite(score)


def test_phrases_met_checks_contiguous_runs():
    ids = tf.constant([[5, 6, 7, 3, 0], [7, 6, 5, 3, 0]])
    phrases = tf.constant([[[6, 7], [5, -1]], [[6, 7], [-1, -1]]])
    assert phrases_met(ids, phrases).numpy().tolist() == [True, False]
