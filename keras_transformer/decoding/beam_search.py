"""Beam search with the GNMT length penalty, in TensorFlow ops only (paper, section 6.1:
"beam search with a beam size of 4 and length penalty alpha = 0.6 ... terminate early when
possible"): the `BeamSearch` strategy of `loop.decode`, which runs the loop, owns the shapes
and drops finished items' rows (see `loop` for the step function's protocol).

    strategy = BeamSearch(vocab_size, SearchOptions(n_best=2))  # the paper's beam and alpha
    ids, scores = decode(strategy, step, bos_ids, max_len, LoopOptions(eos_id=3),
                         max_lengths=limits)

Rows are batch-major: row `b * beam_size + k` is beam k of item b. Whenever beams are
re-ranked, `advance` returns the old row of every new one, and the loop reorders the step
function's cache by it; `shared` state never is.

Scores. A hypothesis y of length |y| (generated tokens, EOS included, the initial id excluded)
scores

    s(y) = log P(y | x) / lp(|y|),   lp(n) = ((5 + n) / 6) ** alpha    (GNMT, Wu et al. 2016)

where log P(y | x) is the sum of the log-softmax of the chosen tokens. A hypothesis that
reaches its maximum length without EOS is finished there with that length.

Each step keeps the 2 * beam best extensions (flax `examples/wmt/decode.py`), so hypotheses
that just finished cannot crowd out live ones: the `beam` best unfinished extensions stay
alive. An extension ending in EOS (or at the length limit) finishes only if it ranks among the
`beam` best extensions of its step (as in fairseq); finished hypotheses compete for `beam`
slots by score. With `stop_early`, an item stops once its `n_best`-th finished score beats the
best score any live beam could still reach (its log-probability can only fall, and for
alpha >= 0 its penalty is at most `lp(max length)`), so early stopping never changes the
returned hypotheses. An item is done (`item_done`: the loop may drop its rows) once its
`n_best` hypotheses are settled: it reached its limit, or with `stop_early` no live beam can
beat them. `SearchOptions(stop_lookahead="next")` looks only one step ahead instead (a live
beam's score if it ended at the next step; Hugging Face's default heuristic, near CTranslate2's
top-beam exit): fewer steps, and a rare result may change (`best_penalty`).

Beam size 1 with alpha = 0 is greedy decoding: EOS finishes a hypothesis only as the argmax,
and the live beam (the runner-up) cannot beat it afterwards. With alpha > 0 a longer
hypothesis may still win after the argmax was EOS (its penalty is larger), and the search
goes on to find it.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.checks import check_int
from keras_transformer.config import SearchOptions
from keras_transformer.decoding.loop import NEG_INF, LoopOptions, StepContext, Strategy

TOP_K_BLOCK = 128  # values per block of `top_k_rows`


class BeamState(NamedTuple):
    """The strategy's state in the loop. `length` is `step + 1` (growing) or
    `max_decode_length + 1` (padded); position 0 of the ids holds the initial id."""

    alive_ids: tf.Tensor  # int32: (active, beam, length)
    alive_log_probs: tf.Tensor  # float32: (active, beam); -inf for dead beams
    finished_ids: tf.Tensor  # int32: (active, beam, length); pad_id after EOS
    finished_scores: tf.Tensor  # float32: (active, beam) log P / lp(len), descending; -inf = empty


def length_penalty(length, alpha: float) -> tf.Tensor:
    """GNMT length penalty `((5 + length) / 6) ** alpha`, float32."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def best_penalty(step, limits, alpha: float, lookahead: str = "limit") -> tf.Tensor:
    """The length penalty that gives a live beam after `step` tokens its best reachable
    score `log P / lp`, float32, `(active,)` like `limits` or a scalar (both divide the
    `(active,)` log-probabilities): its log-probability can only fall, so for alpha >= 0 the
    largest lp ahead, `lp(limit)` ("limit": an exact bound) or `lp(step + 1)` ("next": only
    if it ended at the next step, a heuristic); for alpha < 0 the nearest, `lp(step + 1)`."""
    if alpha >= 0 and lookahead == "limit":
        return length_penalty(limits, alpha)
    return length_penalty(step + 1, alpha)


def top_k_rows(values, k: int, block: int | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """`tf.math.top_k(values, k)` (values and int32 indices `(rows, k)`, ties to the lower
    index) of float `(rows, width)`, for a static `width`, in two short passes.

    TensorFlow's CPU TopK compares element by element, a large part of a base beam-search
    step over beam x vocabulary log-probabilities (the profile "Where a base decoding step's
    time goes" in benchmarks/results/2026-11-25-benchmarks-history.md). Here the row is cut
    into blocks of `block`: the k blocks with the largest maxima (lower block first on ties)
    hold the k largest values, so a vectorized max per block, a top-k over the block maxima
    and one over the k chosen blocks (in index order, so ties still go to the lower index)
    give exactly `tf.math.top_k`'s result. Narrow rows take `tf.math.top_k` directly.
    `block` defaults to `TOP_K_BLOCK`.
    """
    block = TOP_K_BLOCK if block is None else block
    width = values.shape[-1]
    if width is None:
        raise ValueError(f"top_k_rows needs a static last axis. Received: shape={values.shape}")
    blocks = -(-width // block)
    if blocks <= 2 * k:  # too few blocks to save anything
        return tf.math.top_k(values, k=k)
    rows = tf.shape(values)[0]
    if blocks * block != width:  # pad with -inf: never ahead of a real value of the row
        values = tf.pad(values, [[0, 0], [0, blocks * block - width]], constant_values=NEG_INF)
    values = tf.reshape(values, [rows, blocks, block])  # (rows, width) -> (rows, blocks, block)
    _, chosen = tf.math.top_k(tf.reduce_max(values, axis=-1), k=k)  # (rows, k) block ids
    chosen = tf.sort(chosen, axis=-1)  # index order: ties go to the lower index below too
    candidates = tf.gather(values, chosen, batch_dims=1)  # (rows, k, block)
    top_values, pos = tf.math.top_k(tf.reshape(candidates, [rows, k * block]), k=k)
    indices = tf.gather(chosen, pos // block, batch_dims=1) * block + pos % block  # (rows, k)
    return top_values, indices


def _flatten_beams(tensor) -> tf.Tensor:
    shape = tf.shape(tensor)
    return tf.reshape(tensor, tf.concat([[shape[0] * shape[1]], shape[2:]], 0))


class BeamSearch(Strategy):
    """Batched beam search, a strategy of `loop.decode`; see the module docstring for the
    scores.

    Args:
        vocab_size: number of logits per step (at least 2).
        search: `SearchOptions` (default: the paper's): `beam_size` hypotheses kept per item,
            length penalty `alpha` (0 ranks by plain log-probability), `n_best` hypotheses
            returned per item (early stopping waits until all of them are settled),
            `stop_early`. Its `padded_decode` and `max_extra_length` are for whoever sets up
            the loop: `LoopOptions.padded` and `decode`'s lengths (`search.search_ids`).
        top_k_block: values per block of the per-row selection (`top_k_rows`); the same
            results for any value, a block as wide as the vocabulary is `tf.math.top_k`.

    `decode` returns `(ids, scores)`: int32 `(batch, n_best, length + 1)` and float32
    `(batch, n_best)` scores `log P / lp(len)`, descending. A slot with no hypothesis (only
    possible with a tiny vocabulary) scores -inf.
    """

    growing = ("alive_ids", "finished_ids")

    def __init__(
        self, vocab_size: int, search: SearchOptions | None = None, top_k_block: int = TOP_K_BLOCK
    ):
        search = search or SearchOptions()
        self.vocab_size = check_int("vocab_size", vocab_size, minimum=2)
        self.top_k_block = check_int("top_k_block", top_k_block)
        self.beam_size, self.alpha = search.beam_size, search.alpha
        self.n_best, self.stop_early = search.n_best, search.stop_early
        self.stop_lookahead = search.stop_lookahead
        self.rows_per_item = self.beam_size
        # "next" bounds a live beam by its score at the next step only: with alpha > 0 a
        # later step can still beat the kept hypotheses (`best_penalty`), so the loop freezes
        # an item where it first stops (`Strategy.exact_stop`)
        self.exact_stop = not (self.stop_early and self.stop_lookahead == "next" and self.alpha > 0)

    def result_shapes(self) -> tuple[list[int], list[int]]:
        return [self.n_best, 1], [self.n_best]

    def initial_state(self, initial_ids, limits, max_len, loop: LoopOptions) -> BeamState:
        batch = tf.shape(initial_ids)[0]
        ids = tf.tile(initial_ids[:, None, None], [1, self.beam_size, 1])  # (batch, beam, 1)
        ids = loop.start_ids(ids, max_len)  # padded: -> (batch, beam, max_len + 1)
        first = tf.one_hot(0, self.beam_size, on_value=0.0, off_value=NEG_INF)  # beam 0 lives
        return BeamState(
            alive_ids=ids,
            alive_log_probs=tf.tile(first[None, :], [batch, 1]),
            finished_ids=tf.fill(tf.shape(ids), tf.constant(loop.pad_id, tf.int32)),
            finished_scores=tf.fill([batch, self.beam_size], NEG_INF),
        )

    def decoder_ids(self, state: BeamState) -> tf.Tensor:
        return _flatten_beams(state.alive_ids)  # -> (active * beam, length)

    def extend(self, state: BeamState, logits, length, loop: LoopOptions):
        """Score every extension and keep the 2 * beam best: their log-probabilities, ids
        (the new token at `length`), source beams and new tokens, all `(active, 2 * beam,
        ...)`."""
        active = tf.shape(state.alive_ids)[0]
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))  # (active * beam, vocab)
        # A beam's extensions score its log-probability plus each token's, so the item's
        # 2 * beam best are among the 2 * beam best tokens of each beam: select those per
        # row first, then rank the beam * k of them (not beam * vocab).
        k = min(2 * self.beam_size, self.vocab_size)
        log_probs = tf.reshape(log_probs, [-1, self.vocab_size])  # a static width, whatever fn's
        row_log_probs, row_tokens = top_k_rows(log_probs, k, self.top_k_block)  # (rows, k) each
        row_log_probs = tf.reshape(row_log_probs, [active, self.beam_size, k])
        candidates = state.alive_log_probs[:, :, None] + row_log_probs  # (active, beam, k)
        candidates = tf.reshape(candidates, [active, self.beam_size * k])
        topk_log_probs, topk_pos = tf.math.top_k(candidates, k=2 * self.beam_size)
        topk_beam = topk_pos // k  # int32: (active, 2 * beam)
        row_tokens = tf.reshape(row_tokens, [active, self.beam_size * k])
        topk_tokens = tf.gather(row_tokens, topk_pos, batch_dims=1)  # int32: (active, 2 * beam)
        topk_ids = tf.gather(state.alive_ids, topk_beam, batch_dims=1)  # (a, 2beam, length)
        topk_ids = loop.write_token(topk_ids, topk_tokens, length)
        return topk_log_probs, topk_ids, topk_beam, topk_tokens

    def advance(self, state: BeamState, logits, at: StepContext, loop: LoopOptions):
        """One step: the new state and the source row `(active, beam)` of every new live beam
        in the old row order."""
        length = at.step + 1  # generated tokens of every candidate, EOS included
        topk_log_probs, topk_ids, topk_beam, topk_tokens = self.extend(state, logits, length, loop)
        limits = at.limits[:, None]  # (active, 1)
        ends = tf.equal(topk_tokens, loop.eos_id) | (length >= limits)  # (active, 2 * beam)
        # Alive: the `beam` best candidates that did not end.
        alive_scores = tf.where(ends, NEG_INF, topk_log_probs)
        alive_log_probs, alive_pos = tf.math.top_k(alive_scores, k=self.beam_size)
        alive_ids = tf.gather(topk_ids, alive_pos, batch_dims=1)  # (active, beam, length)
        source_beam = tf.gather(topk_beam, alive_pos, batch_dims=1)  # (active, beam)
        active = tf.shape(source_beam)[0]
        rows = source_beam + tf.range(active)[:, None] * self.beam_size  # (active, beam)
        # Finished: the candidates that ended (within their limit) among the `beam` best
        # (fairseq: an EOS outside them finishes nothing) are merged into the slots.
        in_beam = tf.range(2 * self.beam_size) < self.beam_size  # (2 * beam,)
        finishes = ends & in_beam & (length <= limits) & (topk_log_probs > NEG_INF)
        new_scores = tf.where(finishes, topk_log_probs / length_penalty(length, self.alpha),
                              NEG_INF)  # fmt: skip
        old_ids = loop.grow(state.finished_ids)  # growing: -> (active, beam, length + 1)
        all_scores = tf.concat([state.finished_scores, new_scores], 1)  # (active, 3 * beam)
        all_ids = tf.concat([old_ids, topk_ids], 1)  # (active, 3 * beam, length)
        finished_scores, pos = tf.math.top_k(all_scores, k=self.beam_size)  # old ones win ties
        new_state = BeamState(
            alive_ids=alive_ids,
            alive_log_probs=alive_log_probs,
            finished_ids=tf.gather(all_ids, pos, batch_dims=1),
            finished_scores=finished_scores,
        )
        return new_state, rows

    def item_done(self, state: BeamState, step, limits) -> tf.Tensor:
        """bool `(active,)`: the item reached its limit or (with stop_early) cannot improve
        its `n_best` hypotheses any more (with `stop_lookahead="limit"` later steps never
        change them; "next" looks one step ahead only)."""
        done = step >= limits  # (active,)
        if self.stop_early:
            best_alive = state.alive_log_probs[:, 0] / best_penalty(
                step, limits, self.alpha, self.stop_lookahead
            )  # (active,)
            worst_kept = state.finished_scores[:, self.n_best - 1]  # (active,)
            done = done | (worst_kept > best_alive)
        return done

    def results(self, state: BeamState, rows=None) -> tuple[tf.Tensor, tf.Tensor]:
        """`(ids (n, n_best, length), scores (n, n_best))`, best first."""
        ids, scores = state.finished_ids, state.finished_scores
        if rows is not None:
            ids, scores = tf.gather(ids, rows), tf.gather(scores, rows)
        return ids[:, : self.n_best], scores[:, : self.n_best]
