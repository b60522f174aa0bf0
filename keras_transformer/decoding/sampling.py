"""Greedy decoding and top-k / top-p (nucleus) sampling: the `Sampling` strategy of
`loop.decode`, through the same step functions as beam search (one row per item).

    ids, log_probs = decode(Sampling(), step, bos_ids, 60, LoopOptions(eos_id=3))  # greedy
    top_p = Sampling(SamplingOptions("top_p", top_p=0.9, seed=(1, 2)))
    ids, log_probs = decode(top_p, step, bos_ids, 60, LoopOptions(eos_id=3))
    # knobs decided per call (tensors, as the export's translate_sample signature takes them):
    Sampling(SamplingOptions("sample", top_k=k, top_p=p, temperature=t, seed=seed_pair))

Sampling uses stateless random ops: the same `seed` gives the same samples for the same batch
(a row's draws depend on the seed, the step and the row's position in the batch), and the
loop stays free of Python side effects (and runs under XLA with padded buffers).

When the loop drops finished items' rows (growing buffers), draws are
still taken on a full-batch logits tensor with every row at its original position (the CPU
kernel's random stream per row depends on the batch it is given), so shrinking changes no
sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from keras_transformer.decoding.loop import NEG_INF, LoopOptions, StepContext, Strategy

METHODS = ("greedy", "top_k", "top_p", "sample")
TINY = float(np.finfo(np.float32).tiny)  # the smallest temperature: float32's smallest normal


class SampleState(NamedTuple):
    """The strategy's state in the loop. `length` is `step + 1` (growing) or
    `max_decode_length + 1` (padded)."""

    ids: tf.Tensor  # int32: (active, length); pad_id after EOS
    log_probs: tf.Tensor  # float32: (active,) sum of the model's log-softmax of chosen tokens
    finished: tf.Tensor  # bool: (active,) EOS emitted or limit reached


def top_k_filter(logits, k: int) -> tf.Tensor:
    """Logits `(batch, vocab)` with everything below the k-th largest set to -inf.

    Tokens tied with the k-th largest value are all kept. Outside XLA `Sampling`'s "top_k"
    method; under XLA, which makes a top-k read for its k-th value alone a full sort,
    `filter_logits(..., bisect=True)`, which the tests hold to this."""
    kth = tf.math.top_k(logits, k=k).values[:, -1:]  # (batch, 1)
    return tf.where(logits < kth, NEG_INF, logits)


def top_p_filter(logits, p: float) -> tf.Tensor:
    """Keep the nucleus: the fewest most-probable tokens whose probability sums to >= p.

    Logits `(batch, vocab)`; tokens outside the nucleus get -inf (ties with its least likely
    member are kept). The most likely token is always kept. By sorting: `Sampling`'s "top_p"
    method outside XLA, and the reference of `filter_logits(..., bisect=True)`."""
    sorted_logits = tf.sort(logits, direction="DESCENDING", axis=-1)  # (batch, vocab)
    probs = tf.nn.softmax(sorted_logits)
    mass_before = tf.cumsum(probs, axis=-1, exclusive=True)  # (batch, vocab)
    in_nucleus = mass_before < p  # a token joins while the mass before it is below p
    n_keep = tf.maximum(tf.reduce_sum(tf.cast(in_nucleus, tf.int32), axis=-1), 1)  # (batch,)
    threshold = tf.gather(sorted_logits, n_keep - 1, batch_dims=1)[:, None]  # (batch, 1)
    return tf.where(logits < threshold, NEG_INF, logits)


def filter_logits(logits, top_k=0, top_p=1.0, bisect: bool = False) -> tf.Tensor:
    """Keep the `top_k` most likely tokens (all when `top_k <= 0`), then among them the
    nucleus of probability mass `top_p` (renormalized over the kept tokens; all when
    `top_p >= 1`); the others get -inf.

    Logits `(batch, vocab)`. `top_k` and `top_p` may be scalar tensors (no data-dependent
    shapes: fine under XLA). With one of them off it keeps what `top_k_filter` or
    `top_p_filter` keeps, ties with the last kept token included. With both off (the
    defaults of `translate_sample`) the logits come back as they are (a `tf.cond`).

    `bisect`: find each threshold by bisection over the logits' order (at most 33 counting
    passes over each row) instead of one sort of every row. Under XLA on a CPU, which makes
    `tf.sort` a full sort (and `tf.math.top_k` too once only its k-th value is read; its
    whole output stays fast), the bisection is the faster; outside XLA the sort is
    (benchmarks/results/2026-11-27-sampling-without-sort.md). With both
    filters on, a bisected top k includes the tokens tied with the k-th (the sort takes
    exactly k) before the nucleus is renormalized over them."""
    top_k = tf.cast(top_k, tf.int32)
    top_p = tf.cast(top_p, tf.float32)
    off = (top_k <= 0) & (top_p >= 1.0)
    on = _filter_bisected if bisect else _filter_sorted
    return tf.cond(off, lambda: logits, lambda: on(logits, top_k, top_p))


def _filter_sorted(logits, top_k, top_p) -> tf.Tensor:
    """`filter_logits` with `top_k` (int32 scalar) or `top_p` (float32 scalar) on, by one
    sort of each row."""
    vocab = tf.shape(logits)[-1]
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


def _filter_bisected(logits, top_k, top_p) -> tf.Tensor:
    """`filter_logits` with `top_k` (int32 scalar) or `top_p` (float32 scalar) on, by
    bisection (no sort)."""
    keys = order_keys(logits)  # (batch, vocab) int64, in the logits' order
    lowest, highest = tf.reduce_min(keys, axis=-1), tf.reduce_max(keys, axis=-1)  # (batch,)
    k = tf.cast(tf.minimum(top_k, tf.shape(logits)[-1]), tf.int64)

    def kth_largest():  # the largest t with at least k keys >= t: the k-th largest key
        def enough(t):
            return tf.reduce_sum(tf.cast(keys >= t[:, None], tf.int64), axis=-1) >= k

        return _largest_true(enough, lowest, highest + 1)[0]

    k_key = tf.cond(top_k > 0, kth_largest, lambda: lowest)  # (batch,)
    kept = keys >= k_key[:, None]  # (batch, vocab): the top k, ties included

    def nucleus():  # the smallest key t whose strictly larger keys hold less than top_p
        probs = tf.nn.softmax(tf.where(kept, tf.cast(logits, tf.float32), NEG_INF))

        def outside(t):  # True below the threshold: the mass above t still reaches top_p
            above = tf.reduce_sum(tf.where(keys > t[:, None], probs, 0.0), axis=-1)
            return (above >= top_p) | (t < k_key)

        return _largest_true(outside, k_key - 1, highest)[1]  # nothing above highest

    threshold = tf.cond(top_p < 1.0, nucleus, lambda: k_key)  # (batch,)
    return tf.where(keys >= threshold[:, None], logits, NEG_INF)


def order_keys(values) -> tf.Tensor:
    """Float `values` -> int64 keys of the same shape in the same order (the float32 bits
    as a signed int, the negative ones' magnitude bits flipped); equal values (-0.0 and 0.0
    too) get equal keys."""
    values = tf.cast(values, tf.float32)
    values = tf.where(tf.equal(values, 0.0), tf.zeros_like(values), values)  # -0.0 -> 0.0
    bits = tf.bitcast(values, tf.int32)
    flipped = tf.where(bits < 0, tf.bitwise.bitwise_xor(bits, 0x7FFFFFFF), bits)
    return tf.cast(flipped, tf.int64)


def _largest_true(predicate, low, high) -> tuple[tf.Tensor, tf.Tensor]:
    """Per row, bisection of a `predicate` of int64 keys `(batch,) -> (batch,)` bool that is
    true up to some key and false above it, from `low` (true) and `high` (false), both
    `(batch,)`: `(last true, first false)`, which differ by one. At most 33 passes (keys
    span less than 2**33)."""

    def body(low, high):
        middle = low + (high - low) // 2
        true = predicate(middle)
        return tf.where(true, middle, low), tf.where(true, high, middle)

    return tf.while_loop(
        lambda low, high: tf.reduce_any(high - low > 1), body, (low, high),
        maximum_iterations=34,
    )  # fmt: skip


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
    if _is_number(temperature) and not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(
            f"temperature must be > 0 and finite. Received: temperature={temperature!r}"
        )


def sampling_tensors(temperature, top_k, top_p):
    """The knobs of a served request as the sampler takes them, `(temperature float32, top_k
    int32, top_p float32, checks)`, with `checks` the assertions to run first (each message
    quotes the value received, before any cast):

    - temperature finite and at least float32's smallest normal number (a smaller one would
      divide the logits by zero; an infinite one samples uniformly: noise, not text);
    - top_k >= 0, capped at int32's largest (any k over the vocabulary keeps every token)
      before the cast, so that no int64 wraps around to another k;
    - top_p in (0, 1]."""
    given = {"temperature": tf.convert_to_tensor(temperature), "top_k": tf.convert_to_tensor(top_k),
             "top_p": tf.convert_to_tensor(top_p)}  # fmt: skip
    temperature = tf.cast(given["temperature"], tf.float32)
    top_k = given["top_k"]
    top_k = tf.cast(tf.minimum(top_k, tf.cast(np.iinfo(np.int32).max, top_k.dtype)), tf.int32)
    top_p = tf.cast(given["top_p"], tf.float32)
    rules = {
        "temperature": (tf.math.is_finite(temperature) & (temperature >= TINY),
                        f"must be > 0 and finite (at least {TINY:.3g}, float32 normal)"),
        "top_k": (given["top_k"] >= 0, "must be >= 0 (0: off)"),
        "top_p": ((top_p > 0) & (top_p <= 1), "must be in (0, 1]"),
    }  # fmt: skip
    checks = [
        tf.debugging.Assert(ok, [f"{name} {rule}. Received: {name}=", given[name]])
        for name, (ok, rule) in rules.items()
    ]
    return temperature, top_k, top_p, checks


@dataclass(frozen=True)
class SamplingOptions:
    """How `Sampling` chooses each token (checked by `check_sampling_args`).

    Args:
        method: "greedy" (argmax chain), "top_k", "top_p" or "sample" (both filters of
            `filter_logits`, each off by default; the only method whose knobs may be tensors).
        top_k: with "top_k", sample among the k most likely tokens.
        top_p: with "top_p", sample in the nucleus of probability mass p.
        temperature: divides the logits before filtering (sampling only).
        seed: int pair or int `(2,)` tensor for the stateless random ops.
        bisect: the filters find their thresholds by bisection instead of sorting
            (`filter_logits`): the same tokens kept, faster under XLA, slower outside it;
            `Translator` sets it for its XLA searches.
    """

    method: str = "greedy"
    top_k: Any = 0
    top_p: Any = 1.0
    temperature: Any = 1.0
    seed: Any = (0, 0)
    bisect: bool = False

    def __post_init__(self) -> None:
        check_sampling_args(self.method, self.top_k, self.top_p, self.temperature)


class Sampling(Strategy):
    """Greedy decoding (argmax chain) or top-k / top-p sampling, a strategy of
    `loop.decode`; one per call (it holds the seed as a tensor).

    Args:
        options: `SamplingOptions` (default: greedy).

    `decode` returns `(ids, log_probs)`: int32 `(batch, length + 1)`, the initial id first
    and `pad_id` after EOS; float32 `(batch,)`, the model's log-probability of the generated
    tokens (EOS included, untempered logits).
    """

    growing = ("ids",)

    def __init__(self, options: SamplingOptions | None = None):
        self.options = options or SamplingOptions()
        self.seed = tf.cast(self.options.seed, tf.int64)  # (2,)

    def result_shapes(self) -> tuple[list[int], list[int]]:
        return [1], []

    def initial_state(self, initial_ids, limits, max_len, loop: LoopOptions) -> SampleState:
        ids = loop.start_ids(initial_ids[:, None], max_len)  # (batch, 1 or max_len + 1)
        batch = tf.shape(initial_ids)[0]
        return SampleState(ids=ids, log_probs=tf.zeros([batch]), finished=limits <= 0)

    def decoder_ids(self, state: SampleState) -> tf.Tensor:
        return state.ids  # (active, length)

    def choose(self, logits, at: StepContext) -> tf.Tensor:
        """Next tokens `(active,)` from float32 logits `(active, vocab)`."""
        options = self.options
        if options.method == "greedy":
            return tf.argmax(logits, axis=-1, output_type=tf.int32)
        scaled = logits / tf.cast(options.temperature, logits.dtype)
        if options.method == "sample" or options.bisect:
            top_k = options.top_k if options.method in ("top_k", "sample") else 0
            top_p = options.top_p if options.method in ("top_p", "sample") else 1.0
            scaled = filter_logits(scaled, top_k, top_p, options.bisect)  # as top_k/p_filter
        elif options.method == "top_k":  # a static k: TensorFlow's TopK, no sort
            scaled = top_k_filter(scaled, options.top_k)
        else:
            scaled = top_p_filter(scaled, options.top_p)
        if at.items is not None:  # rows dropped: draw with every row at its original position
            full = tf.zeros(tf.stack([at.batch, tf.shape(scaled)[1]]), scaled.dtype)
            scaled = tf.tensor_scatter_nd_update(full, at.items[:, None], scaled)  # (batch, v)
        seed = tf.random.experimental.stateless_fold_in(self.seed, at.step)
        drawn = tf.random.stateless_categorical(scaled, 1, seed=seed, dtype=tf.int32)
        drawn = drawn[:, 0]  # (rows, 1) -> (rows,)
        return drawn if at.items is None else tf.gather(drawn, at.items)  # (active,)

    def advance(self, state: SampleState, logits, at: StepContext, loop: LoopOptions):
        """One step; rows stay in place (no reorder)."""
        logits = tf.cast(logits, tf.float32)  # (active, vocab)
        tokens = self.choose(logits, at)  # (active,)
        chosen = tf.gather(tf.nn.log_softmax(logits), tokens, batch_dims=1)  # (active,)
        log_probs = state.log_probs + tf.where(state.finished, 0.0, chosen)
        tokens = tf.where(state.finished, loop.pad_id, tokens)  # finished rows: padding
        length = at.step + 1
        ids = loop.write_token(state.ids[:, None], tokens[:, None], length)  # (active, 1, len)
        ids = ids[:, 0]  # -> (active, length)
        finished = state.finished | tf.equal(tokens, loop.eos_id) | (length >= at.limits)
        return SampleState(ids, log_probs, finished), None

    def item_done(self, state: SampleState, step, limits) -> tf.Tensor:
        return state.finished  # (active,)

    def results(self, state: SampleState, rows=None) -> tuple[tf.Tensor, tf.Tensor]:
        """`(ids (n, length), log_probs (n,))`."""
        if rows is None:
            return state.ids, state.log_probs
        return tf.gather(state.ids, rows), tf.gather(state.log_probs, rows)
