"""Guided beam search: a target prefix, alternatives after it, phrases to avoid and phrases that
must appear (lexical constraints), as one strategy of `loop.decode` (`GuidedBeamSearch`). The
plain `BeamSearch` and its graph are untouched: a plain translation never builds this one.

    guide = Guide.build(batch, vocab_size, prefix_ids=..., constraints=..., avoid=...)
    strategy = GuidedBeamSearch(vocab_size, SearchOptions(), guide)
    ids, scores = decode(strategy, step, bos_ids, max_len, loop, max_lengths=limits)

Per item (all `(batch, ...)`, -1 pads every id table; `Guide`):

- prefix: the first `prefix_lengths` tokens are forced (every other token masked), so the
  model's cache holds the prefix when the free search starts; with a `prefill.Prefill` the
  first of them are already in the cache (one decoder pass) and the loop starts after them.
  At the first free step the tokens are restricted to `first_allowed` (the pieces that
  complete an unfinished last word, EOS excluded: the output never stops at the prefix's end).
- alternatives: `alternative[b] = r >= 0` makes item b take the r-th most likely allowed token
  at the first free step (its only live beam), then search freely: items that repeat a source
  with r = 0..k-1 give k continuations that differ in their first token after the prefix.
- avoid: phrases of pieces; at every free step, a hypothesis that ends with the first m - 1
  pieces of a phrase of m cannot take its last piece, so no phrase is ever completed.
- constraints: phrases that must appear. Each step's candidates are each live beam's
  `2 * beam` best tokens plus the token that advances each of its constraints (the next
  token of the phrase it is in, or the first token of each unmet phrase); every candidate
  carries its constraint state (phrases met, phrase in progress and its position), and the
  beam is shared among the numbers of constraint tokens met ("banks") by dynamic beam
  allocation (Post and Vilar 2018), vectorized as Hu et al. 2019 and fairseq: candidates are
  taken round-robin over the banks, the most tokens met first, each bank best score first.
  Finished hypotheses rank those that meet every constraint first (then by score); one that
  cannot meet them all still finishes, so a request never fails (the caller checks which
  were met in the output, `phrases_met`).

Scores are the plain search's, `log P(y | x) / lp(|y|)` with the forced prefix's tokens
counted. Growing or fixed buffers alike.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.config import SearchOptions
from keras_transformer.decoding.beam_search import (
    BeamSearch,
    best_penalty,
    length_penalty,
    top_k_rows,
)
from keras_transformer.decoding.loop import NEG_INF, LoopOptions, StepContext
from keras_transformer.decoding.prefill import Prefill


class Guide(NamedTuple):
    """What guides each item's search; int tables padded with -1."""

    prefix_ids: tf.Tensor  # int32: (batch, P) forced tokens
    prefix_lengths: tf.Tensor  # int32: (batch,)
    first_allowed: tf.Tensor  # bool: (batch, vocab) tokens allowed at the first free step
    alternative: tf.Tensor  # int32: (batch,) rank taken at the first free step; -1: free
    avoid: tf.Tensor  # int32: (batch, A, M) phrases never completed
    constraints: tf.Tensor  # int32: (batch, C, L) phrases that must appear

    @classmethod
    def build(cls, batch, vocab_size: int, prefix_ids=None, first_allowed=None,
              alternative=None, avoid=None, constraints=None) -> Guide:  # fmt: skip
        """A guide with every part not given switched off (no prefix, all tokens allowed,
        no alternative, nothing to avoid, no constraint); tables may be ragged."""

        def table(ids, rank):
            if ids is None:
                return tf.fill(tf.stack([batch] + [1] * (rank - 1)), -1)  # one empty
            if isinstance(ids, tf.RaggedTensor):
                ids = ids.to_tensor(default_value=-1)
            ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
            shape = tf.shape(ids)
            pad = [[0, 0]] + [[0, tf.maximum(1 - shape[i], 0)] for i in range(1, rank)]
            return tf.pad(ids, pad, constant_values=-1)  # every axis but the first >= 1

        prefix_ids = table(prefix_ids, 2)
        if first_allowed is None:
            first_allowed = tf.ones(tf.stack([batch, vocab_size]), tf.bool)
        if alternative is None:
            alternative = tf.fill(tf.reshape(batch, [1]), -1)
        return cls(
            prefix_ids=prefix_ids,
            prefix_lengths=tf.reduce_sum(tf.cast(prefix_ids >= 0, tf.int32), axis=1),
            first_allowed=tf.cast(first_allowed, tf.bool),
            alternative=tf.cast(alternative, tf.int32),
            avoid=table(avoid, 3),
            constraints=table(constraints, 3),
        )


class GuidedState(NamedTuple):
    """`BeamState`'s fields (finished hypotheses: those with `finished_met` first, then by
    score) plus the guide and
    each live beam's constraint state; every field `(active, ...)`."""

    alive_ids: tf.Tensor  # int32: (active, beam, length)
    alive_log_probs: tf.Tensor  # float32: (active, beam); -inf for dead beams
    finished_ids: tf.Tensor  # int32: (active, beam, length)
    finished_scores: tf.Tensor  # float32: (active, beam) log P / lp(len); -inf = empty
    finished_met: tf.Tensor  # bool: (active, beam) the hypothesis meets every constraint
    met: tf.Tensor  # bool: (active, beam, C) phrases met by each live beam
    phrase: tf.Tensor  # int32: (active, beam) phrase in progress, -1 none
    position: tf.Tensor  # int32: (active, beam) its tokens matched so far
    just_met: tf.Tensor  # bool: (active, beam) the newest token completed a phrase
    prefix_ids: tf.Tensor  # int32: (active, P)
    prefix_lengths: tf.Tensor  # int32: (active,)
    first_allowed: tf.Tensor  # bool: (active, vocab)
    alternative: tf.Tensor  # int32: (active,)
    avoid: tf.Tensor  # int32: (active, A, M)
    constraints: tf.Tensor  # int32: (active, C, L)


def phrase_lengths(phrases) -> tf.Tensor:
    """int32 `(..., n)`: the length of each -1-padded phrase of `phrases (..., n, L)`."""
    return tf.reduce_sum(tf.cast(phrases >= 0, tf.int32), axis=-1)


def avoid_mask(ids, step, avoid) -> tf.Tensor:
    """int32 `(active, beam, A)`: the token each hypothesis must not take next for each
    phrase (-1: none), for hypotheses `ids (active, beam, length)`
    whose newest token is at position `step` (position 0 is the initial id, never matched)
    and phrases `avoid (active, A, M)`."""
    lengths = phrase_lengths(avoid)  # (active, A)
    width = tf.shape(avoid)[2]
    j = tf.range(width)[None, None, :]  # (1, 1, M)
    positions = step - lengths[:, :, None] + 2 + j  # (active, A, M): history of piece j
    used = j < lengths[:, :, None] - 1  # the first m - 1 pieces
    safe = tf.clip_by_value(positions, 0, tf.shape(ids)[2] - 1)
    active, phrases = tf.shape(avoid)[0], tf.shape(avoid)[1]
    flat = tf.reshape(safe, [active, phrases * width])  # -> (active, A * M)
    history = tf.gather(tf.transpose(ids, [0, 2, 1]), flat, axis=1, batch_dims=1)
    history = tf.reshape(history, [active, phrases, width, -1])  # (active, A, M, beam)
    same = tf.equal(history, avoid[:, :, :, None]) & (positions >= 1)[:, :, :, None]
    match = tf.reduce_all(same | ~used[:, :, :, None], axis=2)  # (active, A, beam)
    match &= (lengths >= 1)[:, :, None]
    last = tf.gather(avoid, tf.maximum(lengths - 1, 0), axis=2, batch_dims=2)  # (active, A)
    blocked = tf.where(match, last[:, :, None], -1)  # (active, A, beam)
    return tf.transpose(blocked, [0, 2, 1])  # -> (active, beam, A)


def block_tokens(log_probs, tokens) -> tf.Tensor:
    """`log_probs (active, beam, vocab)` with -inf at the int32 `tokens (active, beam, n)`
    (-1: nothing)."""
    vocab = tf.shape(log_probs)[2]
    hits = tf.one_hot(tf.where(tokens >= 0, tokens, vocab), vocab, on_value=True,
                      off_value=False, dtype=tf.bool)  # fmt: skip  # (active, beam, n, vocab)
    return tf.where(tf.reduce_any(hits, axis=2), NEG_INF, log_probs)


def advance_phrases(met, phrase, position, tokens, constraints):
    """The constraint state after each candidate token.

    Args:
        met: bool `(active, beam, C)`; phrase, position: int32 `(active, beam)`, of the beams.
        tokens: int32 `(active, beam, K)` candidate tokens of each beam.
        constraints: int32 `(active, C, L)`.

    Returns `(met (active, beam, K, C), phrase (active, beam, K), position (active, beam, K))`:
    a token that continues the phrase in progress advances it (and meets it at its end);
    any other token drops it and may start the first unmet phrase it begins."""
    lengths = phrase_lengths(constraints)  # (active, C)
    count = tf.shape(constraints)[1]
    phrase, position = phrase[:, :, None], position[:, :, None]  # (active, beam, 1)
    safe_phrase = tf.maximum(phrase, 0)
    index = tf.stack([safe_phrase, tf.minimum(position, tf.shape(constraints)[2] - 1)], -1)
    expected = tf.gather_nd(constraints, index, batch_dims=1)  # (active, beam, 1)
    follows = (phrase >= 0) & tf.equal(tokens, expected)  # (active, beam, K)
    length = tf.gather(lengths, safe_phrase, batch_dims=1)  # (active, beam, 1)
    completes = follows & tf.equal(position + 1, length)
    # Starting a phrase: the first unmet one whose first token this is.
    firsts = constraints[:, :, 0][:, None, None, :]  # (active, 1, 1, C)
    starts = tf.equal(tokens[:, :, :, None], firsts) & ~met[:, :, None, :]  # (a, beam, K, C)
    starts &= lengths[:, None, None, :] > 0
    any_start = tf.reduce_any(starts, axis=3) & ~follows  # (active, beam, K)
    first = tf.argmax(tf.cast(starts, tf.int32), axis=3, output_type=tf.int32)  # (a, beam, K)
    first_length = tf.gather(lengths, first, batch_dims=1)  # (active, beam, K)
    start_meets = any_start & tf.equal(first_length, 1)
    done_phrase = tf.where(completes, phrase, tf.where(start_meets, first, -1))
    met = met[:, :, None, :] | tf.one_hot(
        tf.where(done_phrase >= 0, done_phrase, count), count, on_value=True, off_value=False,
        dtype=tf.bool)  # fmt: skip  # (active, beam, K, C)
    keep = follows & ~completes
    new_phrase = tf.where(keep, phrase, tf.where(any_start & ~start_meets, first, -1))
    new_position = tf.where(keep, position + 1, tf.where(new_phrase >= 0, 1, 0))
    return met, new_phrase, new_position


def met_count(met) -> tf.Tensor:
    """int32 `(...)`: the phrases met in bool `met (..., C)`."""
    return tf.reduce_sum(tf.cast(met, tf.int32), axis=-1)


def tokens_met(met, position, constraints) -> tf.Tensor:
    """int32: the constraint tokens met (the bank) of each hypothesis, `met (..., C)`,
    `position (...)`, for `constraints (active, C, L)` (`met` led by the active axis)."""
    lengths = phrase_lengths(constraints)  # (active, C)
    shape = tf.concat([tf.shape(lengths)[:1], tf.ones([tf.rank(position) - 1], tf.int32),
                       tf.shape(lengths)[1:]], 0)  # fmt: skip
    per_phrase = tf.reshape(lengths, shape)  # (active, 1.., C)
    return tf.reduce_sum(tf.where(met, per_phrase, 0), axis=-1) + position


def rank_in_bank(scores, banks) -> tf.Tensor:
    """int32 `(active, N)`: how many candidates of the same bank rank above each (higher
    score, or equal and earlier), for float `scores` and int32 `banks` `(active, N)`."""
    n = tf.shape(scores)[1]
    index = tf.range(n)
    same = tf.equal(banks[:, :, None], banks[:, None, :])  # (active, N, N)
    better = scores[:, None, :] > scores[:, :, None]
    tie = tf.equal(scores[:, None, :], scores[:, :, None]) & (index[None, :] < index[:, None])
    return tf.reduce_sum(tf.cast(same & (better | tie), tf.int32), axis=2)


class GuidedBeamSearch(BeamSearch):
    """Beam search with a `Guide` (see the module docstring); `decode` returns what
    `BeamSearch` returns, the hypotheses that meet every constraint ranked first.

    Args:
        vocab_size: logits per step.
        search: `SearchOptions`.
        guide: the batch's `Guide`, `(batch, ...)` tensors.
        boundary: optional bool `(vocab,)`: the tokens that may follow a completed constraint
            (those that start a word, punctuation, EOS), so that a phrase is met as whole
            words ("Version" not inside "Versionsystem"); None: any token.
        prefill: optional `prefill.Prefill`: the step function's cache already holds the
            first `length` prefix pieces of every item (`prefill.fill_cache`; `decode` then
            gets `start_step=length`): the live beam starts with them and their
            log-probabilities, and the constraint state they leave. None: every piece is
            forced by a loop step.
    """

    growing = ("alive_ids", "finished_ids")

    def __init__(self, vocab_size: int, search: SearchOptions | None, guide: Guide,
                 boundary=None, prefill: Prefill | None = None):  # fmt: skip
        super().__init__(vocab_size, search)
        self.guide = guide
        self.boundary = None if boundary is None else tf.cast(boundary, tf.bool)
        self.prefill = prefill

    def initial_state(self, initial_ids, limits, max_len, loop: LoopOptions) -> GuidedState:
        plain = super().initial_state(initial_ids, limits, max_len, loop)
        batch = tf.shape(initial_ids)[0]
        empty = tf.equal(phrase_lengths(self.guide.constraints), 0)  # (batch, C): met already
        state = GuidedState(
            *plain,
            finished_met=tf.zeros([batch, self.beam_size], tf.bool),
            met=tf.tile(empty[:, None, :], [1, self.beam_size, 1]),  # (batch, beam, C)
            phrase=tf.fill([batch, self.beam_size], -1),
            position=tf.zeros([batch, self.beam_size], tf.int32),
            just_met=tf.zeros([batch, self.beam_size], tf.bool),
            **self.guide._asdict(),
        )
        if self.prefill is None:
            return state
        return self._prefilled(state, initial_ids, max_len, loop)

    def _prefilled(self, state: GuidedState, initial_ids, max_len, loop: LoopOptions):
        """`state` after the prefill's `length` pieces: beam 0 holds them and their
        log-probability, the constraint state as the forced steps would leave it."""
        length, log_probs = self.prefill.length, self.prefill.log_probs
        pieces = state.prefix_ids[:, :length]  # (batch, P)
        ids = tf.concat([initial_ids[:, None], pieces], axis=1)  # (batch, P + 1)
        ids = tf.tile(ids[:, None, :], [1, self.beam_size, 1])  # -> (batch, beam, P + 1)
        if loop.padded:  # -> (batch, beam, max_len + 1)
            ids = tf.pad(ids, [[0, 0], [0, 0], [0, max_len - length]], constant_values=loop.pad_id)
        first = tf.equal(tf.range(self.beam_size), 0)[None, :]  # (1, beam): beam 0 lives
        met, phrase, position, just_met = _follow(state, pieces)
        return state._replace(
            alive_ids=ids,
            alive_log_probs=tf.where(first, tf.cast(log_probs, tf.float32)[:, None], NEG_INF),
            finished_ids=tf.fill(tf.shape(ids), tf.constant(loop.pad_id, tf.int32)),
            met=met, phrase=phrase, position=position, just_met=just_met,
        )  # fmt: skip

    def guided_log_probs(self, state: GuidedState, logits, step) -> tf.Tensor:
        """float32 `(active, beam, vocab)` log-probabilities with the guide's masks: the
        forced prefix token, the first free step's allowed tokens (and alternative rank),
        the avoided phrases' last tokens."""
        active = tf.shape(state.alive_ids)[0]
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
        log_probs = tf.reshape(log_probs, [active, self.beam_size, self.vocab_size])
        vocab = tf.range(self.vocab_size)[None, None, :]  # (1, 1, vocab)
        forced = step < state.prefix_lengths  # (active,)
        at = tf.minimum(step, tf.shape(state.prefix_ids)[1] - 1)
        forced_token = tf.gather(state.prefix_ids, at, axis=1)  # (active,)
        allowed = ~forced[:, None, None] | tf.equal(vocab, forced_token[:, None, None])
        first = tf.equal(step, state.prefix_lengths)  # (active,)
        allowed &= ~first[:, None, None] | state.first_allowed[:, None, :]
        log_probs = tf.where(allowed, log_probs, NEG_INF)
        log_probs = self._take_alternative(log_probs, state.alternative, first)
        blocked = avoid_mask(state.alive_ids, step, state.avoid)  # (active, beam, A)
        blocked = tf.where(forced[:, None, None], -1, blocked)
        log_probs = block_tokens(log_probs, blocked)
        if self.boundary is not None:  # a completed phrase ends its word
            inside = state.just_met[:, :, None] & ~self.boundary[None, None, :]
            log_probs = tf.where(inside & ~forced[:, None, None], NEG_INF, log_probs)
        return log_probs

    def _take_alternative(self, log_probs, alternative, first) -> tf.Tensor:
        """At the first free step, items with `alternative` r >= 0 keep only their r-th best
        token (of beam 0, the only live one then)."""
        rank = tf.maximum(alternative, 0)  # (active,)
        k = tf.minimum(tf.reduce_max(rank) + 1, self.vocab_size)
        values, tokens = tf.math.top_k(log_probs[:, 0], k=k)  # (active, k)
        token = tf.gather(tokens, tf.minimum(rank, k - 1), batch_dims=1)  # (active,)
        value = tf.gather(values, tf.minimum(rank, k - 1), batch_dims=1)
        token = tf.where((value > NEG_INF) & (rank < k), token, -1)  # none: the item dies
        chosen = tf.equal(tf.range(self.vocab_size)[None, None, :], token[:, None, None])
        applies = (first & (alternative >= 0))[:, None, None]
        return tf.where(applies & ~chosen, NEG_INF, log_probs)

    def candidates(self, state: GuidedState, log_probs):
        """Each beam's `2 * beam` best tokens and its constraint tokens, deduplicated:
        `(tokens, scores, beams)` int32 / float32 / int32 `(active, beam, K)` (-inf scores for
        none), K = 2 * beam + C."""
        active = tf.shape(state.alive_ids)[0]
        k = min(2 * self.beam_size, self.vocab_size)
        flat = tf.reshape(log_probs, [-1, self.vocab_size])
        top_log_probs, top_tokens = top_k_rows(flat, k, self.top_k_block)  # (rows, k)
        top_log_probs = tf.reshape(top_log_probs, [active, self.beam_size, k])
        top_tokens = tf.reshape(top_tokens, [active, self.beam_size, k])
        # The next token of every constraint, for each beam.
        constraints = state.constraints
        count = tf.shape(constraints)[1]
        phrase, position = state.phrase[:, :, None], state.position[:, :, None]
        ids = tf.range(count)[None, None, :]  # (1, 1, C)
        in_it = tf.equal(phrase, ids)
        at = tf.where(in_it, position, 0)  # (active, beam, C)
        index = tf.stack([tf.broadcast_to(ids, tf.shape(at)), tf.minimum(
            at, tf.shape(constraints)[2] - 1)], -1)  # fmt: skip
        next_tokens = tf.gather_nd(constraints, index, batch_dims=1)  # (active, beam, C)
        useful = in_it | ((phrase < 0) & ~state.met)
        next_tokens = tf.where(useful & (next_tokens >= 0), next_tokens, 0)
        next_log_probs = tf.gather(log_probs, next_tokens, batch_dims=2)
        next_log_probs = tf.where(useful, next_log_probs, NEG_INF)
        tokens = tf.concat([top_tokens, next_tokens], axis=2)  # (active, beam, K)
        scores = tf.concat([top_log_probs, next_log_probs], axis=2)
        width = tf.shape(tokens)[2]
        order = tf.range(width)
        duplicate = tf.equal(tokens[:, :, :, None], tokens[:, :, None, :]) & (
            order[None, :] < order[:, None])[None, None]  # fmt: skip  # (a, beam, K, K)
        duplicate &= (scores > NEG_INF)[:, :, None, :]
        duplicate = tf.reduce_any(duplicate, axis=3)
        scores = tf.where(duplicate, NEG_INF, scores) + state.alive_log_probs[:, :, None]
        return tokens, scores

    def advance(self, state: GuidedState, logits, at: StepContext, loop: LoopOptions):
        """One step of dynamic beam allocation: the new state and the source row
        `(active, beam)` of every new live beam."""
        length = at.step + 1
        log_probs = self.guided_log_probs(state, logits, at.step)
        tokens, scores = self.candidates(state, log_probs)  # (active, beam, K)
        met, phrase, position = advance_phrases(
            state.met, state.phrase, state.position, tokens, state.constraints)  # fmt: skip
        banks = tokens_met(met, position, state.constraints)  # (active, beam, K)
        just_met = met_count(met) > met_count(state.met)[:, :, None]  # (active, beam, K)
        active, width = tf.shape(tokens)[0], tf.shape(tokens)[2]
        n = self.beam_size * width

        def flat(t):  # (active, beam, K, ...) -> (active, beam * K, ...)
            return tf.reshape(t, tf.concat([[active, n], tf.shape(t)[3:]], 0))

        tokens, scores, banks, met = flat(tokens), flat(scores), flat(banks), flat(met)
        phrase, position, just_met = flat(phrase), flat(position), flat(just_met)
        beams = tf.repeat(tf.range(self.beam_size), width)[None, :]  # (1, N) source beam
        beams = tf.tile(beams, [active, 1])  # (active, N)
        ids = tf.gather(state.alive_ids, beams, batch_dims=1)  # (active, N, length)
        ids = loop.write_token(ids, tokens, length)
        limits = at.limits[:, None]
        ends = tf.equal(tokens, loop.eos_id) | (length >= limits)  # (active, N)
        valid = scores > NEG_INF
        rank = rank_in_bank(tf.where(valid, scores, NEG_INF), banks)
        top_bank = tf.reduce_sum(phrase_lengths(state.constraints), axis=1)[:, None]
        key = rank * (top_bank + 1) + (top_bank - banks)  # round-robin, most met first
        alive_key = tf.where(valid & ~ends, -key, tf.int32.min)
        _, pick = tf.math.top_k(alive_key, k=self.beam_size)  # (active, beam)
        picked = tf.gather(alive_key, pick, batch_dims=1) > tf.int32.min

        def take(t):
            return tf.gather(t, pick, batch_dims=1)

        alive_log_probs = tf.where(picked, take(scores), NEG_INF)
        source = take(beams)  # (active, beam)
        rows = source + tf.range(active)[:, None] * self.beam_size
        # Finished: ending candidates among the `beam` best of their bank.
        finishes = ends & valid & (rank < self.beam_size) & (length <= limits)
        new_scores = tf.where(finishes, scores / length_penalty(length, self.alpha), NEG_INF)
        new_met = tf.reduce_all(met, axis=2) & finishes  # (active, N)
        old_ids = loop.grow(state.finished_ids)  # growing: -> (active, beam, length + 1)
        all_met = tf.concat([state.finished_met, new_met], 1)  # (active, beam + N)
        all_scores = tf.concat([state.finished_scores, new_scores], 1)
        pos = met_first(all_met, all_scores, self.beam_size)  # (active, beam)
        all_ids = tf.concat([old_ids, ids], 1)
        new_state = state._replace(
            alive_ids=take(ids),
            alive_log_probs=alive_log_probs,
            finished_ids=tf.gather(all_ids, pos, batch_dims=1),
            finished_scores=tf.gather(all_scores, pos, batch_dims=1),
            finished_met=tf.gather(all_met, pos, batch_dims=1),
            met=take(met),
            phrase=take(phrase),
            position=take(position),
            just_met=take(just_met),
        )
        return new_state, rows

    def item_done(self, state: GuidedState, step, limits) -> tf.Tensor:
        """bool `(active,)`: the limit is reached, or (stop_early) no live beam can beat the
        kept hypotheses, which meet every constraint."""
        done = step >= limits
        if self.stop_early:
            penalty = best_penalty(step, limits, self.alpha, self.stop_lookahead)
            best_alive = tf.reduce_max(state.alive_log_probs, axis=1) / penalty
            worst = self.n_best - 1
            beaten = state.finished_scores[:, worst] > best_alive
            done = done | (state.finished_met[:, worst] & beaten)
        return done

    def results(self, state: GuidedState, rows=None) -> tuple[tf.Tensor, tf.Tensor]:
        ids, scores = state.finished_ids, state.finished_scores
        if rows is not None:
            ids, scores = tf.gather(ids, rows), tf.gather(scores, rows)
        return ids[:, : self.n_best], scores[:, : self.n_best]


def _follow(state: GuidedState, pieces):
    """The constraint state `(met, phrase, position, just_met)` of `state`'s beams after the
    tokens `pieces (active, P)`, as `advance_phrases` leaves it one token at a time."""

    def body(t, met, phrase, position, just_met):
        token = tf.tile(pieces[:, t][:, None, None], [1, tf.shape(met)[1], 1])  # (a, beam, 1)
        new_met, phrase, position = advance_phrases(
            met, phrase, position, token, state.constraints)  # fmt: skip
        new_met = new_met[:, :, 0]  # (active, beam, C)
        just_met = met_count(new_met) > met_count(met)
        return t + 1, new_met, phrase[:, :, 0], position[:, :, 0], just_met

    initial = (tf.constant(0), state.met, state.phrase, state.position, state.just_met)
    final = tf.while_loop(lambda t, *_: t < tf.shape(pieces)[1], body, initial)
    return final[1:]


def met_first(met, scores, k: int) -> tf.Tensor:
    """int32 `(active, k)`: the positions of the `k` best of `(active, n)` hypotheses, those
    with bool `met` first, each group by float `scores` descending, ties to the lower index."""
    by_score = tf.argsort(scores, axis=1, direction="DESCENDING", stable=True)
    met = tf.cast(tf.gather(met, by_score, batch_dims=1), tf.int32)
    by_met = tf.argsort(met, axis=1, direction="DESCENDING", stable=True)
    best = tf.gather(by_score, by_met, batch_dims=1)[:, :k]
    return tf.reshape(best, [-1, k])  # a static k for the loop's shape invariants


def phrases_met(ids, phrases) -> tf.Tensor:
    """bool `(batch,)`: every -1-padded phrase of `phrases (batch, C, L)` appears as a
    contiguous run of `ids (batch, length)` (empty phrases always do)."""
    ids = tf.cast(ids, tf.int32)
    phrases = tf.cast(phrases, tf.int32)
    width = tf.shape(phrases)[2]
    length = tf.shape(ids)[1]
    padded = tf.pad(ids, [[0, 0], [0, width]], constant_values=-2)  # no phrase id is -2
    starts = tf.range(length)[:, None] + tf.range(width)[None, :]  # (length, L)
    windows = tf.gather(padded, starts, axis=1)  # (batch, length, L)
    same = tf.equal(windows[:, :, None, :], phrases[:, None, :, :]) | (
        phrases < 0)[:, None, :, :]  # fmt: skip  # (batch, length, C, L)
    found = tf.reduce_any(tf.reduce_all(same, axis=3), axis=1)  # (batch, C)
    found |= tf.equal(phrase_lengths(phrases), 0)
    return tf.reduce_all(found, axis=1)
