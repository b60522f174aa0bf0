"""Beam search on hand-written probability tables, against exhaustive search in NumPy."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import SearchOptions
from keras_transformer.decoding import BeamSearch, LoopOptions, Sampling, decode, length_penalty
from keras_transformer.decoding.beam_search import TOP_K_BLOCK, top_k_rows
from keras_transformer.testing.steps import row_step, stateless_step
from keras_transformer.testing.tables import BOS, PAD, Table, strip
from keras_transformer.tracing import graph_function


def exhaustive(table, item, limit, alpha, eos):
    """All hypotheses (ending in EOS, or cut at `limit`), best first: [(score, tokens)]."""
    return sorted(table.hypotheses(item, limit, alpha, eos), key=lambda r: -r[0])


def run_search(
    table, batch, beam, alpha, eos, limits, n_best, mode, stop_early=True, lookahead="limit"
):
    padded = mode in ("padded", "xla")

    def search():
        options = SearchOptions(beam_size=beam, alpha=alpha, n_best=n_best, stop_early=stop_early,
                                stop_lookahead=lookahead)  # fmt: skip
        step = row_step(table.fn(padded), table.initial_cache(batch, padded), (), beam, padded)
        return decode(
            BeamSearch(table.vocab, options), step, tf.fill([batch], BOS), table.max_len,
            LoopOptions(eos, PAD, padded=padded), max_lengths=tf.constant(limits),
        )  # fmt: skip

    if mode == "eager":
        ids, scores = search()
    else:
        ids, scores = graph_function(search, jit_compile=mode == "xla")()
    return ids.numpy(), scores.numpy()


@pytest.mark.parametrize("mode", ["eager", "graph", "padded", "xla"])
@pytest.mark.parametrize("vocab,max_len,alpha", [(4, 3, 0.6), (3, 4, 1.5), (4, 3, 0.0)])
def test_matches_exhaustive_search(mode, vocab, max_len, alpha):
    # A beam as wide as every extension of every prefix prunes nothing: the search must
    # return exactly the exhaustive ranking, ids and scores.
    eos, batch, n_best = vocab - 1, 2, 10
    beam = (vocab - 1) ** (max_len - 1) * vocab
    limits = [max_len, max_len - 1]  # per-item limits
    table = Table(seed=vocab * 10 + max_len, batch=batch, vocab=vocab, max_len=max_len)
    ids, scores = run_search(table, batch, beam, alpha, eos, limits, n_best, mode)
    assert ids.shape[:2] == scores.shape == (batch, n_best)
    for item in range(batch):
        expected = exhaustive(table, item, limits[item], alpha, eos)[:n_best]
        got = [strip(row, eos) for row in ids[item]]
        assert got == [tokens for _, tokens in expected]
        np.testing.assert_allclose(scores[item], [s for s, _ in expected], rtol=1e-5)
        assert all(len(tokens) <= limits[item] for tokens in got)


def test_small_beam_finds_what_greedy_misses():
    # vocab: 0 = BOS / filler, 1, 2, 3 = EOS. Probabilities by the last token only:
    # after BOS: 1 (0.55) or 2 (0.45); after 1: 0, 1, 2 (0.33 each) or EOS (0.01);
    # after 2: EOS (0.99). Greedy takes 1 then wanders; beam 2 finds [2, EOS].
    probs = np.full((4, 4), 1e-6)
    probs[0] = [1e-6, 0.55, 0.45, 1e-6]
    probs[1] = [0.33, 0.33, 0.33, 0.01]
    probs[2] = [1e-6, 1e-6, 1e-6, 0.99]
    probs[3] = [0.25, 0.25, 0.25, 0.25]
    probs /= probs.sum(1, keepdims=True)
    table = tf.constant(np.log(probs), tf.float32)

    def fn(ids, step):
        return tf.gather(table, ids[:, -1])

    beam = BeamSearch(4, SearchOptions(beam_size=2, alpha=0.6))
    ids, scores = decode(beam, stateless_step(fn, 2), tf.constant([BOS]), 5, LoopOptions(eos_id=3))
    assert ids.numpy().tolist() == [[[BOS, 2, 3]]]
    log_p = np.log(probs[BOS, 2]) + np.log(probs[2, 3])
    np.testing.assert_allclose(scores.numpy(), [[log_p / ((5 + 2) / 6) ** 0.6]], rtol=1e-5)
    greedy, _ = decode(Sampling(), stateless_step(fn), tf.constant([BOS]), 5, LoopOptions(eos_id=3))
    assert greedy.numpy()[0, :2].tolist() == [BOS, 1]


@pytest.mark.parametrize("seed", range(6))
def test_beam_size_one_equals_greedy_without_length_penalty(seed):
    vocab, max_len, batch = 6, 7, 3
    table = Table(seed=seed, batch=batch, vocab=vocab, max_len=max_len)
    limits = [max_len] * batch
    ids, scores = run_search(table, batch, 1, 0.0, vocab - 1, limits, 1, "graph")
    greedy_ids, greedy_log_probs = graph_function(
        lambda: decode(
            Sampling(),
            row_step(table.fn(False), table.initial_cache(batch, False)),
            tf.fill([batch], BOS),
            max_len,
            LoopOptions(eos_id=vocab - 1, pad_id=PAD),
        )  # fmt: skip
    )()
    for item in range(batch):
        assert strip(ids[item, 0], vocab - 1) == strip(greedy_ids.numpy()[item], vocab - 1)
    np.testing.assert_allclose(scores[:, 0], greedy_log_probs.numpy(), rtol=1e-5)


@pytest.mark.parametrize("mode", ["graph", "padded"])
@pytest.mark.parametrize("n_best", [1, 3])
def test_early_stopping_changes_nothing(mode, n_best):
    vocab, max_len, batch, beam = 8, 12, 4, 3
    table = Table(seed=7, batch=batch, vocab=vocab, max_len=max_len)
    table.by_last[..., vocab - 1] += 3.0  # EOS likely: most items can stop early
    limits = [max_len, 10, 6, max_len]
    runs = [
        run_search(table, batch, beam, 0.6, vocab - 1, limits, n_best, mode, stop_early=stop)
        for stop in (True, False)
    ]
    (early_ids, early_scores), (full_ids, full_scores) = runs
    np.testing.assert_allclose(early_scores, full_scores, rtol=1e-6)
    for item, k in itertools.product(range(batch), range(n_best)):
        got = strip(early_ids[item, k], vocab - 1)
        assert got == strip(full_ids[item, k], vocab - 1)
    if mode == "graph":  # the growing ids show how many steps ran
        assert early_ids.shape[2] < full_ids.shape[2] == max_len + 1


@pytest.mark.parametrize("stop_early", [True, False])
def test_early_stopping_waits_for_a_longer_hypothesis_the_penalty_favours(stop_early):
    # Step 0: EOS (0.6) or 0 (0.4); steps 1-7: 0 (0.999); step 8: EOS (0.999). [EOS] scores
    # log 0.6 = -0.51; the live beam (log 0.4) looks worse at step 1 unless its bound uses
    # the largest penalty ahead: [0] * 8 + [EOS] scores about -0.93 / lp(9) = -0.17.
    probs = np.full((12, 3), 0.0005)
    probs[0] = [0.4, 1e-6, 0.6]
    probs[1:8, 0] = 0.999
    probs[8, 2] = 0.999
    probs[9:] = 1.0 / 3
    log_probs = tf.constant(np.log(probs / probs.sum(1, keepdims=True)), tf.float32)

    def fn(ids, step):
        return tf.tile(log_probs[step][None], [tf.shape(ids)[0], 1])

    beam = BeamSearch(3, SearchOptions(beam_size=1, alpha=2.0, stop_early=stop_early))
    loop = LoopOptions(eos_id=2, pad_id=PAD)
    ids, scores = decode(beam, stateless_step(fn), tf.constant([BOS]), 12, loop)
    assert strip(ids.numpy()[0, 0], 2) == [0] * 8 + [2]
    assert scores.numpy()[0, 0] > np.log(0.6)


@pytest.mark.parametrize("mode", ["graph", "padded"])
def test_next_step_stop_is_the_exact_rule_without_length_penalty(mode):
    # With alpha = 0 every length has penalty 1: looking one step ahead bounds a live beam as
    # well as looking to its limit, so both rules stop at the same step with the same results.
    vocab, max_len, batch, beam = 8, 12, 4, 3
    table = Table(seed=11, batch=batch, vocab=vocab, max_len=max_len)
    table.by_last[..., vocab - 1] += 3.0  # EOS likely: items stop early
    limits = [max_len, 10, 6, max_len]
    exact, next_step = [
        run_search(table, batch, beam, 0.0, vocab - 1, limits, 2, mode, lookahead=lookahead)
        for lookahead in ("limit", "next")
    ]
    assert exact[0].shape == next_step[0].shape  # graph: the same number of steps ran
    np.testing.assert_array_equal(exact[0], next_step[0])
    np.testing.assert_allclose(exact[1], next_step[1], rtol=1e-6)


@pytest.mark.parametrize("mode", ["graph", "padded"])
def test_next_step_stop_never_runs_longer_and_keeps_finished_scores_exact(mode):
    vocab, max_len, batch, beam = 8, 12, 4, 3
    table = Table(seed=5, batch=batch, vocab=vocab, max_len=max_len)
    table.by_last[..., vocab - 1] += 2.0
    limits = [max_len] * batch
    exact, next_step = [
        run_search(table, batch, beam, 1.2, vocab - 1, limits, 1, mode, lookahead=lookahead)
        for lookahead in ("limit", "next")
    ]
    if mode == "graph":
        assert next_step[0].shape[2] <= exact[0].shape[2]
    for item in range(batch):  # whatever it returns is scored exactly, and never beats exact
        tokens = strip(next_step[0][item, 0], vocab - 1)
        prefix, log_p = [BOS], 0.0
        for token in tokens:
            log_p += table.log_probs(item, prefix)[token]
            prefix.append(token)
        lp = length_penalty(len(tokens), 1.2).numpy()
        np.testing.assert_allclose(next_step[1][item, 0], log_p / lp, rtol=1e-5)
        assert next_step[1][item, 0] <= exact[1][item, 0] + 1e-6


def test_next_step_stop_does_not_wait_for_a_longer_hypothesis():
    # The case above: after step 0 [EOS] scores log 0.6 = -0.51 / lp(1) = 1, and the live beam
    # (log 0.4 = -0.92) could reach -0.92 / lp(2) = -0.67 by ending at the next step: worse,
    # so "next" stops there; "limit" goes on and finds [0] * 8 + [EOS] (-0.17).
    probs = np.full((12, 3), 0.0005)
    probs[0] = [0.4, 1e-6, 0.6]
    probs[1:8, 0] = 0.999
    probs[8, 2] = 0.999
    probs[9:] = 1.0 / 3
    probs /= probs.sum(1, keepdims=True)
    log_probs = tf.constant(np.log(probs), tf.float32)

    def fn(ids, step):
        return tf.tile(log_probs[step][None], [tf.shape(ids)[0], 1])

    loop = LoopOptions(eos_id=2, pad_id=PAD)
    found = {}
    for lookahead in ("limit", "next"):
        options = SearchOptions(beam_size=1, alpha=2.0, stop_lookahead=lookahead)
        found[lookahead] = decode(
            BeamSearch(3, options), stateless_step(fn), tf.constant([BOS]), 12, loop
        )
    ids, scores = found["next"]
    assert ids.numpy().tolist() == [[[BOS, 2]]]  # one step ran
    np.testing.assert_allclose(scores.numpy(), [[np.log(probs[0, 2])]], rtol=1e-5)
    assert strip(found["limit"][0].numpy()[0, 0], 2) == [0] * 8 + [2]


def test_scores_are_sorted_and_lengths_penalized():
    vocab, max_len, batch, beam = 6, 6, 2, 4
    table = Table(seed=3, batch=batch, vocab=vocab, max_len=max_len)
    ids, scores = run_search(table, batch, beam, 0.6, vocab - 1, [max_len] * 2, beam, "graph")
    assert np.all(np.diff(scores, axis=1) <= 0)
    for item, k in itertools.product(range(batch), range(beam)):
        tokens = strip(ids[item, k], vocab - 1)
        prefix, log_p = [BOS], 0.0
        for token in tokens:
            log_p += table.log_probs(item, prefix)[token]
            prefix.append(token)
        np.testing.assert_allclose(
            scores[item, k], log_p / length_penalty(len(tokens), 0.6).numpy(), rtol=1e-5
        )


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="beam_size"):
        BeamSearch(4, SearchOptions(beam_size=0))
    with pytest.raises(ValueError, match="n_best"):
        BeamSearch(4, SearchOptions(beam_size=2, n_best=3))
    with pytest.raises(ValueError, match="stop_lookahead.*'soon'"):
        SearchOptions(stop_lookahead="soon")
    with pytest.raises(ValueError, match="vocab_size=1"):
        BeamSearch(1)
    with pytest.raises(ValueError, match="top_k_block=0"):
        BeamSearch(4, top_k_block=0)
    with pytest.raises(ValueError, match="shrink_threshold=1.5"):
        LoopOptions(shrink_threshold=1.5)


def _numpy_top_k(values, k):
    """Reference: the k largest values of each row, ties to the lower index (stable sort)."""
    order = np.argsort(-values, axis=-1, kind="stable")[:, :k]
    return np.take_along_axis(values, order, axis=-1), order


@pytest.mark.parametrize(
    "rows, width, k, block",
    [(5, 32000, 8, 128), (3, 4000, 8, 128), (4, 1000, 3, 16), (2, 257, 2, 8), (3, 40, 8, 128)],
)
def test_top_k_rows_matches_a_stable_sort(rows, width, k, block):
    rng = np.random.default_rng(width)
    cases = {
        "normal": rng.standard_normal((rows, width)).astype("f4"),
        "ties": rng.integers(0, 4, (rows, width)).astype("f4"),  # thousands of equal values
        "mostly -inf": np.where(rng.random((rows, width)) < 0.999, -np.inf, 1.0).astype("f4"),
    }
    cases["mostly -inf"][0] = -np.inf  # a row with no finite value: the lowest indices
    for name, values in cases.items():
        got_values, got_indices = top_k_rows(tf.constant(values), k, block=block)
        want_values, want_indices = _numpy_top_k(values, k)
        np.testing.assert_array_equal(got_values.numpy(), want_values, err_msg=name)
        np.testing.assert_array_equal(got_indices.numpy(), want_indices, err_msg=name)


def test_beam_search_over_a_wide_vocabulary_matches_a_full_top_k():
    """With 3000 words the search selects per row through blocks; with the blocks made as
    wide as the vocabulary it falls back to one `tf.math.top_k` per row. Same results."""
    vocab, batch, steps = 3000, 3, 6
    table = tf.constant(np.random.default_rng(7).standard_normal((vocab, vocab)).astype("f4"))

    def fn(ids, step):
        return tf.gather(table, ids[:, -1]) * 3.0  # logits from the last token

    def search(block):
        options = SearchOptions(beam_size=4, alpha=0.6, n_best=2)
        beam = BeamSearch(vocab, options, top_k_block=block)
        step = stateless_step(fn, 4)
        return decode(beam, step, tf.constant([5, 6, 7]), steps, LoopOptions(eos_id=1))

    ids, scores = search(TOP_K_BLOCK)
    want_ids, want_scores = search(vocab)
    np.testing.assert_array_equal(ids.numpy(), want_ids.numpy())
    np.testing.assert_allclose(scores.numpy(), want_scores.numpy(), rtol=1e-6)
    assert ids.shape[0] == batch


def _item_table(table: Table, item: int) -> Table:
    """`table`'s item alone, as a batch of one."""
    alone = Table(seed=0, batch=1, vocab=table.vocab, max_len=table.max_len)
    alone.by_last, alone.by_sum = table.by_last[item : item + 1], table.by_sum[item : item + 1]
    return alone


@pytest.mark.parametrize("mode", ["graph", "padded"])
def test_next_step_stop_gives_each_item_its_own_result_whatever_its_batch(mode):
    # "next" is a heuristic: a step after an item first stops may still improve it. Each item
    # keeps the result of the step it first stopped at, so a batch (whose items stop at
    # different steps: growing buffers drop them in groups, fixed ones never) gives every
    # item what it gets alone.
    vocab, max_len, batch, beam, alpha = 8, 12, 6, 3, 2.0
    differs = 0
    for seed in range(3):
        table = Table(seed=seed, batch=batch, vocab=vocab, max_len=max_len)
        table.by_last[..., vocab - 1] += 1.0  # EOS plausible: items stop at different steps
        limits = [max_len, 9, 11, max_len, 7, 10]
        ids, scores = run_search(table, batch, beam, alpha, vocab - 1, limits, 2, mode,
                                 lookahead="next")  # fmt: skip
        exact = run_search(table, batch, beam, alpha, vocab - 1, limits, 2, mode)
        for item in range(batch):
            one_ids, one_scores = run_search(_item_table(table, item), 1, beam, alpha,
                                             vocab - 1, limits[item : item + 1], 2, "graph",
                                             lookahead="next")  # fmt: skip
            got = [strip(row, vocab - 1) for row in ids[item]]
            assert got == [strip(row, vocab - 1) for row in one_ids[0]], (seed, item)
            np.testing.assert_allclose(scores[item], one_scores[0], rtol=1e-6)
            differs += int(not np.allclose(exact[1][item], scores[item]))
    assert differs > 0  # cases where "next" stops before the exact rule's result
