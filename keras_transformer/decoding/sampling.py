"""Greedy decoding and top-k / top-p (nucleus) sampling through the same
`symbols_to_logits_fn(ids, step, cache) -> (logits, new_cache)` as `beam_search` (with
`beam_size` 1 the rows are simply the batch items).

    ids, log_probs = sample(fn, bos_ids, cache, max_decode_length=60, eos_id=3)          # greedy
    ids, log_probs = sample(fn, bos_ids, cache, 60, 3, method="top_p", top_p=0.9, seed=(1, 2))
    # knobs decided per call (tensors, as the export's translate_sample signature takes them):
    ids, log_probs = sample(fn, bos_ids, cache, 60, 3, method="sample", top_k=k, top_p=p,
                            temperature=t, seed=seed_pair)

Sampling uses stateless random ops: the same `seed` gives the same samples for the same batch
(a row's draws depend on the seed, the step and the row's position in the batch), and the
loop stays free of Python side effects (and runs under XLA with `padded_decode=True`).

With `shared` per-item state (`(ids, step, cache, shared)` step functions, see `beam_search`)
the rows of finished items are dropped in growing mode, as in `beam_search`; draws are still
taken on a full-batch logits tensor with every row at its original position (the CPU kernel's
random stream per row depends on the batch it is given), so shrinking changes no sample.
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

METHODS = ("greedy", "top_k", "top_p", "sample")


class SampleState(NamedTuple):
    """`length` is `step + 1` (growing) or `max_decode_length + 1` (padded). `active` is the
    batch, or when shrinking the items not dropped yet."""

    step: tf.Tensor  # int32: () tokens generated so far
    ids: tf.Tensor  # int32: (active, length); pad_id after EOS
    log_probs: tf.Tensor  # float32: (active,) sum of the model's log-softmax of chosen tokens
    finished: tf.Tensor  # bool: (active,) EOS emitted or limit reached
    cache: Any  # nest of (active, ...) tensors
    limits: tf.Tensor  # int32: (active,) per-item length limits
    shared: Any  # shrinking: nest of (active, ...) per-item tensors; else ()
    outputs: Any  # shrinking: Outputs, ids (batch, out_length), scores (batch,); else ()


def top_k_filter(logits, k: int) -> tf.Tensor:
    """Logits `(batch, vocab)` with everything below the k-th largest set to -inf.

    Tokens tied with the k-th largest value are all kept."""
    kth = tf.math.top_k(logits, k=k).values[:, -1:]  # (batch, 1)
    return tf.where(logits < kth, NEG_INF, logits)


def top_p_filter(logits, p: float) -> tf.Tensor:
    """Keep the nucleus: the fewest most-probable tokens whose probability sums to >= p.

    Logits `(batch, vocab)`; tokens outside the nucleus get -inf (ties with its least likely
    member are kept). The most likely token is always kept."""
    sorted_logits = tf.sort(logits, direction="DESCENDING", axis=-1)  # (batch, vocab)
    probs = tf.nn.softmax(sorted_logits)
    mass_before = tf.cumsum(probs, axis=-1, exclusive=True)  # (batch, vocab)
    in_nucleus = mass_before < p  # a token joins while the mass before it is below p
    n_keep = tf.maximum(tf.reduce_sum(tf.cast(in_nucleus, tf.int32), axis=-1), 1)  # (batch,)
    threshold = tf.gather(sorted_logits, n_keep - 1, batch_dims=1)[:, None]  # (batch, 1)
    return tf.where(logits < threshold, NEG_INF, logits)


def filter_logits(logits, top_k=0, top_p=1.0) -> tf.Tensor:
    """Keep the `top_k` most likely tokens (all when `top_k <= 0`), then among them the
    nucleus of probability mass `top_p` (renormalized over the kept tokens; all when
    `top_p >= 1`); the others get -inf.

    Logits `(batch, vocab)`. `top_k` and `top_p` may be scalar tensors (one sort, no
    data-dependent shapes: fine under XLA). With one of them off it keeps what `top_k_filter`
    or `top_p_filter` keeps, ties with the last kept token included."""
    vocab = tf.shape(logits)[-1]
    top_k = tf.cast(top_k, tf.int32)
    top_p = tf.cast(top_p, logits.dtype)
    k = tf.where(top_k > 0, tf.minimum(top_k, vocab), vocab)  # ()
    sorted_logits = tf.sort(logits, direction="DESCENDING", axis=-1)  # (batch, vocab)
    in_top_k = tf.range(vocab)[None, :] < k  # (1, vocab)
    probs = tf.nn.softmax(tf.where(in_top_k, sorted_logits, NEG_INF))  # (batch, vocab)
    mass_before = tf.cumsum(probs, axis=-1, exclusive=True)
    n_nucleus = tf.reduce_sum(tf.cast((mass_before < top_p) & in_top_k, tf.int32), axis=-1)
    n_keep = tf.where(top_p >= 1.0, k, tf.maximum(n_nucleus, 1))  # (batch,)
    threshold = tf.gather(sorted_logits, n_keep - 1, batch_dims=1)[:, None]  # (batch, 1)
    return tf.where(logits < threshold, NEG_INF, logits)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_sampling_args(method, top_k, top_p, temperature) -> None:
    """ValueError for a bad method or Python value; tensors are left to the caller."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}. Received: method={method!r}")
    if method == "top_k" and (not isinstance(top_k, int) or top_k <= 0):
        raise ValueError(f"top_k must be a positive int. Received: top_k={top_k!r}")
    if method == "sample" and isinstance(top_k, int) and top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0: off). Received: top_k={top_k!r}")
    if method in ("top_p", "sample") and _is_number(top_p) and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1]. Received: top_p={top_p!r}")
    if _is_number(temperature) and temperature <= 0:
        raise ValueError(f"temperature must be > 0. Received: temperature={temperature!r}")


class _Sampler:
    """`fn` takes `(ids, step, cache, state.shared)` (see `loop.bind_shared`); `batch` is the
    original batch size."""

    def __init__(self, fn, method, top_k, top_p, temperature, seed, eos_id, pad_id, padded,
                 shrink, threshold, batch):  # fmt: skip
        self.fn, self.method, self.top_k, self.top_p = fn, method, top_k, top_p
        self.temperature, self.seed, self.eos_id = temperature, seed, eos_id
        self.pad_id, self.padded, self.shrink = pad_id, padded, shrink
        self.threshold, self.batch = threshold, batch

    def choose(self, logits, step, outputs) -> tf.Tensor:
        """Next tokens `(active,)` from float32 logits `(active, vocab)`."""
        if self.method == "greedy":
            return tf.argmax(logits, axis=-1, output_type=tf.int32)
        scaled = logits / tf.cast(self.temperature, logits.dtype)
        if self.method == "top_k":
            scaled = top_k_filter(scaled, self.top_k)
        elif self.method == "top_p":
            scaled = top_p_filter(scaled, self.top_p)
        else:
            scaled = filter_logits(scaled, self.top_k, self.top_p)
        if self.shrink:  # draw with every row at its original position
            full = tf.zeros(tf.stack([self.batch, tf.shape(scaled)[1]]), scaled.dtype)
            items = outputs.items[:, None]  # (active, 1)
            scaled = tf.tensor_scatter_nd_update(full, items, scaled)  # (batch, vocab)
        seed = tf.random.experimental.stateless_fold_in(self.seed, step)
        drawn = tf.random.stateless_categorical(scaled, 1, seed=seed, dtype=tf.int32)
        drawn = drawn[:, 0]  # (rows, 1) -> (rows,)
        return tf.gather(drawn, outputs.items) if self.shrink else drawn  # (active,)

    def step_fn(self, state: SampleState) -> SampleState:
        logits, cache = self.fn(state.ids, state.step, state.cache, state.shared)
        logits = tf.cast(logits, tf.float32)  # (active, vocab)
        tokens = self.choose(logits, state.step, state.outputs)  # (active,)
        chosen = tf.gather(tf.nn.log_softmax(logits), tokens, batch_dims=1)  # (active,)
        log_probs = state.log_probs + tf.where(state.finished, 0.0, chosen)
        tokens = tf.where(state.finished, self.pad_id, tokens)  # finished rows: padding
        ids = write_token(state.ids[:, None], tokens[:, None], state.step + 1, self.padded,
                           self.pad_id)[:, 0]  # fmt: skip  # (active, length)
        length = state.step + 1
        finished = state.finished | tf.equal(tokens, self.eos_id) | (length >= state.limits)
        state = state._replace(step=length, ids=ids, log_probs=log_probs, finished=finished,
                               cache=cache)  # fmt: skip
        if not self.shrink:
            return state
        compact = should_compact(finished, self.threshold)
        return tf.cond(compact, lambda: self.drop(state), lambda: state)

    def drop(self, state: SampleState) -> SampleState:
        """Store the finished rows' results and drop their rows; the rest keep their order."""
        gone, kept = row_index(state.finished), row_index(tf.logical_not(state.finished))
        outputs = store(state.outputs, gone, tf.gather(state.ids, gone),
                        tf.gather(state.log_probs, gone), self.pad_id)  # fmt: skip
        return state._replace(
            ids=tf.gather(state.ids, kept),  # (kept, length)
            log_probs=tf.gather(state.log_probs, kept),  # (kept,)
            finished=tf.gather(state.finished, kept),  # (kept,)
            cache=gather_rows(state.cache, kept),  # each (kept, ...)
            limits=tf.gather(state.limits, kept),  # (kept,)
            shared=gather_rows(state.shared, kept),  # each (kept, ...)
            outputs=outputs._replace(items=tf.gather(outputs.items, kept)),  # (kept,)
        )

    def keep_going(self, state: SampleState) -> tf.Tensor:
        return tf.logical_not(tf.reduce_all(state.finished))

    def results(self, state: SampleState) -> tuple[tf.Tensor, tf.Tensor]:
        """`(ids (batch, length), log_probs (batch,))` of the final state."""
        if not self.shrink:
            return state.ids, state.log_probs
        rows = tf.range(tf.shape(state.ids)[0])
        outputs = store(state.outputs, rows, state.ids, state.log_probs, self.pad_id)
        return outputs.ids, outputs.scores


def sample(
    symbols_to_logits_fn: SymbolsToLogitsFn,
    initial_ids,
    initial_cache,
    max_decode_length,
    eos_id: int,
    method: str = "greedy",
    top_k: int = 0,
    top_p: float = 1.0,
    temperature: float = 1.0,
    seed=(0, 0),
    padded_decode: bool = False,
    max_lengths=None,
    pad_id: int = 0,
    shared=None,
    shrink: bool | None = None,
    shrink_threshold: float = SHRINK_THRESHOLD,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Greedy decoding (argmax chain) or top-k / top-p sampling.

    Args:
        symbols_to_logits_fn, initial_ids, max_decode_length, eos_id, padded_decode,
            max_lengths, pad_id, shrink, shrink_threshold: as in `beam_search` (rows are
            batch items).
        initial_cache: nest of `(batch, ...)` tensors, used as is.
        method: "greedy", "top_k", "top_p" or "sample" (both filters of `filter_logits`,
            each off by default; the only method whose knobs may be tensors).
        top_k: with "top_k", sample among the k most likely tokens.
        top_p: with "top_p", sample in the nucleus of probability mass p.
        temperature: divides the logits before filtering (sampling only).
        seed: int pair or int `(2,)` tensor for the stateless random ops.
        shared: optional nest of per-item `(batch, ...)` tensors passed to the step function
            as its fourth argument (see `beam_search`), used as is.

    Returns:
        `(ids, log_probs)`: int32 `(batch, length + 1)`, the initial id first and `pad_id`
        after EOS; float32 `(batch,)`, the model's log-probability of the generated tokens
        (EOS included, untempered logits). Shrinking changes none of them.
    """
    check_sampling_args(method, top_k, top_p, temperature)
    check_shrink_threshold(shrink_threshold)
    shrink = (shared is not None if shrink is None else bool(shrink)) and not padded_decode
    initial_ids = tf.cast(tf.convert_to_tensor(initial_ids), tf.int32)
    max_len, limits = length_limits(initial_ids, max_decode_length, max_lengths)
    ids = start_ids(initial_ids[:, None], max_len, padded_decode, pad_id)  # (batch, 1 or max+1)
    batch = tf.shape(initial_ids)[0]
    fn, state_shared = bind_shared(symbols_to_logits_fn, shared, carried=shrink)
    outputs = initial_outputs(batch, [1], [], pad_id) if shrink else ()
    state = SampleState(tf.constant(0, tf.int32), ids, tf.zeros([batch]), limits <= 0,
                        initial_cache, limits, state_shared, outputs)  # fmt: skip
    growing = dict(
        ids=free_last_axis(ids), cache=tf.nest.map_structure(growing_shape, initial_cache)
    )
    if shrink:  # the item axis shrinks too
        growing = dict(
            ids=tf.TensorShape([None, None]),
            log_probs=tf.TensorShape([None]),
            finished=tf.TensorShape([None]),
            cache=tf.nest.map_structure(shrinking_cache_shape, initial_cache),
            limits=tf.TensorShape([None]),
            shared=tf.nest.map_structure(shrinking_shape, state_shared),
            outputs=outputs_shape(outputs),
        )
    sampler = _Sampler(fn, method, top_k, top_p, temperature, tf.cast(seed, tf.int64), eos_id,
                       pad_id, padded_decode, shrink, shrink_threshold, batch)  # fmt: skip
    final = run_loop(sampler.keep_going, sampler.step_fn, state, padded_decode, growing, max_len)
    return sampler.results(final)
