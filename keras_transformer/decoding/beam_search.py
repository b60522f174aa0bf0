"""Beam search with the GNMT length penalty, in TensorFlow ops only (paper, section 6.1:
"beam search with a beam size of 4 and length penalty alpha = 0.6 ... terminate early when
possible").

The search knows nothing about the model (TF Model Garden manner): it only calls

    logits, new_cache = symbols_to_logits_fn(ids, step, cache)

where `ids` is int32 `(batch * beam, length)` (the hypotheses so far, `ids[:, step]` being the
newest token), `step` a scalar int32 tensor, and `cache` the per-hypothesis state, a nest of
`(batch * beam, ...)` tensors; it returns float `(batch * beam, vocab_size)` logits for the next
token and the updated cache. Rows are batch-major: row `b * beam_size + k` is beam k of item b
(`tile_beams` lays tensors out this way).

Cache layout. Only per-hypothesis state (the decoder self-attention keys/values) belongs in
`cache`: it is reordered with one `tf.gather` over the batch*beam axis whenever beams are
re-ranked. State shared by all beams of one source (encoder memory, encoder-decoder keys/values,
the memory mask) is never reordered, because every beam of an item sees the same rows. Pass it
as `shared`, a nest of per-item `(batch, ...)` tensors: the search tiles it once with
`tile_beams` and calls

    logits, new_cache = symbols_to_logits_fn(ids, step, cache, shared)

with `shared` `(batch * beam, ...)`, unchanged from step to step. (The three-argument form
captures such state in its closure, tiled by the caller; the search then cannot shrink.)

Shrinking (growing mode, on by default with `shared`). An item whose `n_best` hypotheses are
settled (it reached its limit, or with `stop_early` no live beam can beat them: the test that
ends the search when it holds for every item) gains nothing from more steps. Once at least
`shrink_threshold` of the live items are settled (0: at every settled item), their rows are
dropped from the live state: ids, log-probabilities, finished slots and limits, the cache (in
the same gather as the beam reorder) and `shared` (one gather of every tensor in it, which is
why it is not done at every step). Their results go to full-batch outputs at their original
index (`tf.tensor_scatter_nd_update`); the live rows keep their order and `ids`, `cache` and
`shared` hold only them, so the step function sees `(active * beam, ...)` rows with `active`
falling as items finish. A dropped item's hypotheses could not have changed, so shrinking
returns the same ids and scores (tests/test_shrinking.py). With `padded_decode` the shapes stay
static and nothing is dropped.

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
returned hypotheses.

Beam size 1 with alpha = 0 is greedy decoding: EOS finishes a hypothesis only as the argmax,
and the live beam (the runner-up) cannot beat it afterwards. With alpha > 0 a longer
hypothesis may still win after the argmax was EOS (its penalty is larger), and the search
goes on to find it.

Two modes: a growing cache and growing ids (`padded_decode=False`, `tf.while_loop` with `None`
shape invariants), and fixed-size buffers (`padded_decode=True`: static shapes, as XLA wants;
`symbols_to_logits_fn` must then write its cache at position `step`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from keras_transformer.decoding.loop import (
    NEG_INF,
    SHRINK_THRESHOLD,
    SymbolsToLogitsFn,
    bind_shared,
    check_shrink_threshold,
    free_last_axis,
    gather_rows,
    growing_shape,
    initial_outputs,
    length_limits,
    outputs_shape,
    row_index,
    run_loop,
    should_compact,
    shrinking_cache_shape,
    shrinking_shape,
    start_ids,
    store,
    write_token,
)

TOP_K_BLOCK = 128  # values per block of `top_k_rows`


class BeamState(NamedTuple):
    """The `tf.while_loop` state. `length` is `step + 1` (growing) or `max_decode_length + 1`
    (padded); position 0 of the ids holds the initial id. `active` is the batch, or when
    shrinking the items not dropped yet."""

    step: tf.Tensor  # int32: () tokens generated so far
    alive_ids: tf.Tensor  # int32: (active, beam, length)
    alive_log_probs: tf.Tensor  # float32: (active, beam); -inf for dead beams
    alive_cache: Any  # nest of (active * beam, ...) tensors
    finished_ids: tf.Tensor  # int32: (active, beam, length); pad_id after EOS
    finished_scores: tf.Tensor  # float32: (active, beam) log P / lp(len), descending; -inf = empty
    limits: tf.Tensor  # int32: (active,) per-item length limits
    shared: Any  # shrinking: nest of (active * beam, ...) per-item tensors; else ()
    outputs: Any  # shrinking: Outputs, ids (batch, n_best, out_length), scores (batch, n_best)


def length_penalty(length, alpha: float) -> tf.Tensor:
    """GNMT length penalty `((5 + length) / 6) ** alpha`, float32."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def tile_beams(tensor, beam_size: int) -> tf.Tensor:
    """`(batch, ...)` -> `(batch * beam_size, ...)`, each row repeated beam_size times."""
    return tf.repeat(tensor, beam_size, axis=0)  # -> (batch * beam, ...)


def top_k_rows(values, k: int, block: int | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """`tf.math.top_k(values, k)` (values and int32 indices `(rows, k)`, ties to the lower
    index) of float `(rows, width)`, for a static `width`, in two short passes.

    TensorFlow's CPU TopK compares element by element (about 6 ns each: 14 ms of a base
    beam-search step over 4 x 32000 log-probabilities). Here the row is cut into blocks of
    `block`: the k blocks with the largest maxima (lower block first on ties) hold the k
    largest values, so a vectorized max per block, a top-k over the block maxima and one over
    the k chosen blocks (in index order, so ties still go to the lower index) give exactly
    `tf.math.top_k`'s result. Narrow rows take `tf.math.top_k` directly. `block` defaults
    to `TOP_K_BLOCK`.
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


def _beam_rows(items, beam_size: int) -> tf.Tensor:
    """Rows of items `(n,)` in a batch-major `(active * beam, ...)` tensor -> `(n * beam,)`."""
    return tf.reshape(items[:, None] * beam_size + tf.range(beam_size), [-1])


class _Search:
    """One beam search; `step_fn` is the `tf.while_loop` body. `fn` takes
    `(ids, step, cache, state.shared)` (see `loop.bind_shared`)."""

    def __init__(self, fn, vocab_size, beam_size, alpha, max_len, eos_id, pad_id, padded,
                 stop_early, n_best, shrink, threshold):  # fmt: skip
        self.fn, self.vocab_size, self.beam_size, self.alpha = fn, vocab_size, beam_size, alpha
        self.max_len, self.eos_id, self.pad_id, self.padded = max_len, eos_id, pad_id, padded
        self.stop_early, self.n_best = stop_early, n_best
        self.shrink, self.threshold = shrink, threshold

    def extend(self, state: BeamState):
        """Score every extension and keep the 2 * beam best: their log-probabilities, ids,
        source beams and new tokens, all `(active, 2 * beam, ...)`, and the new cache."""
        active = tf.shape(state.alive_ids)[0]
        flat_ids = _flatten_beams(state.alive_ids)  # -> (active * beam, length)
        logits, new_cache = self.fn(flat_ids, state.step, state.alive_cache, state.shared)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))  # (active * beam, vocab)
        # A beam's extensions score its log-probability plus each token's, so the item's
        # 2 * beam best are among the 2 * beam best tokens of each beam: select those per
        # row first, then rank the beam * k of them (not beam * vocab).
        k = min(2 * self.beam_size, self.vocab_size)
        log_probs = tf.reshape(log_probs, [-1, self.vocab_size])  # a static width, whatever fn's
        row_log_probs, row_tokens = top_k_rows(log_probs, k)  # (active * beam, k) each
        row_log_probs = tf.reshape(row_log_probs, [active, self.beam_size, k])
        candidates = state.alive_log_probs[:, :, None] + row_log_probs  # (active, beam, k)
        candidates = tf.reshape(candidates, [active, self.beam_size * k])
        topk_log_probs, topk_pos = tf.math.top_k(candidates, k=2 * self.beam_size)
        topk_beam = topk_pos // k  # int32: (active, 2 * beam)
        row_tokens = tf.reshape(row_tokens, [active, self.beam_size * k])
        topk_tokens = tf.gather(row_tokens, topk_pos, batch_dims=1)  # int32: (active, 2 * beam)
        topk_ids = tf.gather(state.alive_ids, topk_beam, batch_dims=1)  # (a, 2beam, length)
        topk_ids = write_token(topk_ids, topk_tokens, state.step + 1, self.padded, self.pad_id)
        return topk_log_probs, topk_ids, topk_beam, topk_tokens, new_cache

    def advance(self, state: BeamState):
        """One step: the new state with its cache left out (`()`), the new cache in the old
        row order, and the source row `(active, beam)` of every new live beam in it."""
        topk_log_probs, topk_ids, topk_beam, topk_tokens, new_cache = self.extend(state)
        length = state.step + 1  # generated tokens of every candidate, EOS included
        limits = state.limits[:, None]  # (active, 1)
        ends = tf.equal(topk_tokens, self.eos_id) | (length >= limits)  # (active, 2 * beam)
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
        old_ids = state.finished_ids
        if not self.padded:  # -> (active, beam, length + 1)
            old_ids = tf.pad(old_ids, [[0, 0], [0, 0], [0, 1]], constant_values=self.pad_id)
        all_scores = tf.concat([state.finished_scores, new_scores], 1)  # (active, 3 * beam)
        all_ids = tf.concat([old_ids, topk_ids], 1)  # (active, 3 * beam, length)
        finished_scores, pos = tf.math.top_k(all_scores, k=self.beam_size)  # old ones win ties
        new_state = state._replace(
            step=length,
            alive_ids=alive_ids,
            alive_log_probs=alive_log_probs,
            alive_cache=(),
            finished_ids=tf.gather(all_ids, pos, batch_dims=1),
            finished_scores=finished_scores,
        )
        return new_state, new_cache, rows

    def step_fn(self, state: BeamState) -> BeamState:
        new_state, new_cache, rows = self.advance(state)
        if not self.shrink:
            rows = tf.reshape(rows, [-1])  # -> (batch * beam,)
            return new_state._replace(alive_cache=gather_rows(new_cache, rows))
        done = self.item_done(new_state)  # (active,)
        compact = should_compact(done, self.threshold)
        keep = tf.logical_not(done) | tf.logical_not(compact)  # (active,)
        # The beam reorder drops the dropped items' cache rows in the same gather.
        rows = tf.reshape(tf.gather(rows, row_index(keep)), [-1])  # -> (kept * beam,)
        new_state = tf.cond(
            compact, lambda: self.drop(new_state, keep), lambda: new_state
        )  # fields: (kept, ...)
        return new_state._replace(alive_cache=gather_rows(new_cache, rows))

    def drop(self, state: BeamState, keep) -> BeamState:
        """Store the results of the items not in `keep` (bool `(active,)`) and drop their
        rows (all fields but the cache); the kept rows keep their order."""
        gone, kept = row_index(tf.logical_not(keep)), row_index(keep)  # (gone,), (kept,)
        outputs = store(
            state.outputs, gone,
            tf.gather(state.finished_ids, gone)[:, : self.n_best],  # (gone, n_best, length)
            tf.gather(state.finished_scores, gone)[:, : self.n_best],  # (gone, n_best)
            self.pad_id,
        )  # fmt: skip
        return state._replace(
            alive_ids=tf.gather(state.alive_ids, kept),  # (kept, beam, length)
            alive_log_probs=tf.gather(state.alive_log_probs, kept),  # (kept, beam)
            finished_ids=tf.gather(state.finished_ids, kept),  # (kept, beam, length)
            finished_scores=tf.gather(state.finished_scores, kept),  # (kept, beam)
            limits=tf.gather(state.limits, kept),  # (kept,)
            shared=gather_rows(state.shared, _beam_rows(kept, self.beam_size)),
            outputs=outputs._replace(items=tf.gather(outputs.items, kept)),  # (kept,)
        )

    def item_done(self, state: BeamState) -> tf.Tensor:
        """bool `(active,)`: the item reached its limit or (with stop_early) cannot improve
        its `n_best` hypotheses any more (then later steps never change them)."""
        done = state.step >= state.limits  # (active,)
        if self.stop_early:
            if self.alpha >= 0:
                best_penalty = length_penalty(state.limits, self.alpha)  # largest lp ahead
            else:
                best_penalty = length_penalty(state.step + 1, self.alpha)
            best_alive = state.alive_log_probs[:, 0] / best_penalty  # (active,)
            worst_kept = state.finished_scores[:, self.n_best - 1]  # (active,)
            done = done | (worst_kept > best_alive)
        return done

    def keep_going(self, state: BeamState) -> tf.Tensor:
        """False once every item reached its limit or (with stop_early) cannot improve."""
        return (state.step < self.max_len) & tf.logical_not(tf.reduce_all(self.item_done(state)))

    def results(self, state: BeamState) -> tuple[tf.Tensor, tf.Tensor]:
        """`(ids (batch, n_best, length), scores (batch, n_best))` of the final state."""
        ids = state.finished_ids[:, : self.n_best]  # (active, n_best, length)
        scores = state.finished_scores[:, : self.n_best]  # (active, n_best)
        if not self.shrink:
            return ids, scores
        outputs = store(state.outputs, tf.range(tf.shape(ids)[0]), ids, scores, self.pad_id)
        return outputs.ids, outputs.scores


def _initial_state(initial_ids, initial_cache, limits, shared, beam_size, max_len, padded,
                   pad_id, outputs) -> BeamState:  # fmt: skip
    batch = tf.shape(initial_ids)[0]
    ids = tf.tile(tf.cast(initial_ids, tf.int32)[:, None, None], [1, beam_size, 1])  # (b, k, 1)
    ids = start_ids(ids, max_len, padded, pad_id)  # padded: -> (batch, beam, max_len + 1)
    first = tf.one_hot(0, beam_size, on_value=0.0, off_value=NEG_INF)  # only beam 0 is live
    return BeamState(
        step=tf.constant(0, tf.int32),
        alive_ids=ids,
        alive_log_probs=tf.tile(first[None, :], [batch, 1]),
        alive_cache=tf.nest.map_structure(lambda t: tile_beams(t, beam_size), initial_cache),
        finished_ids=tf.fill(tf.shape(ids), tf.constant(pad_id, tf.int32)),
        finished_scores=tf.fill([batch, beam_size], NEG_INF),
        limits=limits,
        shared=shared,
        outputs=outputs,
    )


def _check_args(vocab_size, beam_size, n_best, alpha) -> None:
    for name, value in (("vocab_size", vocab_size), ("beam_size", beam_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int. Received: {name}={value!r}")
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2. Received: vocab_size={vocab_size}")
    if isinstance(n_best, bool) or not isinstance(n_best, int) or not 1 <= n_best <= beam_size:
        raise ValueError(
            f"n_best must be an int in [1, beam_size={beam_size}]. Received: n_best={n_best!r}"
        )
    if not isinstance(alpha, (int, float)):
        raise TypeError(f"alpha must be a Python number. Received: alpha={alpha!r}")


def beam_search(
    symbols_to_logits_fn: SymbolsToLogitsFn,
    initial_ids,
    initial_cache,
    vocab_size: int,
    beam_size: int,
    alpha: float,
    max_decode_length,
    eos_id: int,
    padded_decode: bool = False,
    max_lengths=None,
    n_best: int = 1,
    stop_early: bool = True,
    pad_id: int = 0,
    shared=None,
    shrink: bool | None = None,
    shrink_threshold: float = SHRINK_THRESHOLD,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Batched beam search; see the module docstring for the protocol and the scores.

    Runs eagerly, inside `tf.function`, and (with `padded_decode=True`) under
    `jit_compile=True`. Only stock TensorFlow ops: exportable to a SavedModel for TF Serving.

    Args:
        symbols_to_logits_fn: `(ids, step, cache) -> (logits, new_cache)`, or with `shared`
            `(ids, step, cache, shared) -> (logits, new_cache)`, as described above.
        initial_ids: int `(batch,)`, the first token of every hypothesis (BOS).
        initial_cache: nest of per-item `(batch, ...)` tensors (or an empty structure); tiled
            here to `(batch * beam, ...)` and reordered with the beams.
        vocab_size: number of logits per step.
        beam_size: hypotheses kept per item.
        alpha: length penalty exponent (paper: 0.6; 0 ranks by plain log-probability).
        max_decode_length: int or scalar int tensor, the most tokens a hypothesis may generate
            (EOS included). With `padded_decode` it is the size of the id buffers and must be
            static under XLA (a Python int, or computed from static shapes).
        eos_id: the end-of-sequence id.
        padded_decode: fixed-size buffers (static shapes, for XLA) instead of growing ones.
        max_lengths: optional int `(batch,)`, per-item limits `<= max_decode_length`; a
            hypothesis reaching its item's limit without EOS is finished there.
        n_best: hypotheses returned per item, best first; early stopping waits until all of
            them are settled.
        stop_early: stop an item once no live beam can beat its `n_best`-th finished one.
        pad_id: fills the ids after EOS.
        shared: optional nest of per-item `(batch, ...)` tensors the step function reads but
            never changes (encoder-decoder keys/values, memory mask): tiled here to
            `(batch * beam, ...)` once, never reordered by beam, passed as the fourth argument.
        shrink: drop the rows of finished items (growing mode only; ignored with
            `padded_decode`). Default: when `shared` is given. With `shared` None, True
            promises that the step function holds no per-item state outside `cache`.
        shrink_threshold: drop rows once at least this fraction of the live items has
            finished since the last drop (0: at every finish).

    Returns:
        `(ids, scores)`: int32 `(batch, n_best, length + 1)` with the initial id at position 0
        and `pad_id` after EOS, where `length` is the number of steps run (growing mode) or
        `max_decode_length` (padded); float32 `(batch, n_best)` scores `log P / lp(len)`,
        descending. A slot with no hypothesis (only possible with a tiny vocabulary) scores
        -inf. Shrinking changes none of them.
    """
    _check_args(vocab_size, beam_size, n_best, alpha)
    check_shrink_threshold(shrink_threshold)
    shrink = (shared is not None if shrink is None else bool(shrink)) and not padded_decode
    initial_ids = tf.convert_to_tensor(initial_ids)
    max_len, limits = length_limits(initial_ids, max_decode_length, max_lengths)
    if shared is not None:  # -> (batch * beam, ...)
        shared = tf.nest.map_structure(lambda t: tile_beams(t, beam_size), shared)
    fn, state_shared = bind_shared(symbols_to_logits_fn, shared, carried=shrink)
    outputs = ()
    if shrink:
        batch = tf.shape(initial_ids)[0]
        outputs = initial_outputs(batch, [n_best, 1], [n_best], pad_id)
    search = _Search(fn, vocab_size, beam_size, alpha, max_len, eos_id, pad_id, padded_decode,
                     stop_early, n_best, shrink, shrink_threshold)  # fmt: skip
    state = _initial_state(initial_ids, initial_cache, limits, state_shared, beam_size, max_len,
                           padded_decode, pad_id, outputs)  # fmt: skip
    growing = dict(
        alive_ids=free_last_axis(state.alive_ids),
        alive_cache=tf.nest.map_structure(growing_shape, state.alive_cache),
        finished_ids=free_last_axis(state.finished_ids),
    )
    if shrink:  # the item axis shrinks too
        growing.update(
            alive_ids=tf.TensorShape([None, beam_size, None]),
            alive_log_probs=tf.TensorShape([None, beam_size]),
            finished_ids=tf.TensorShape([None, beam_size, None]),
            finished_scores=tf.TensorShape([None, beam_size]),
            alive_cache=tf.nest.map_structure(shrinking_cache_shape, state.alive_cache),
            limits=tf.TensorShape([None]),
            shared=tf.nest.map_structure(shrinking_shape, state.shared),
            outputs=outputs_shape(outputs),
        )
    final = run_loop(search.keep_going, search.step_fn, state, padded_decode, growing, max_len)
    return search.results(final)
