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

from dataclasses import dataclass
from typing import Any, NamedTuple

import tensorflow as tf

from keras_transformer.decoding.loop import NEG_INF, LoopOptions, StepContext, Strategy

METHODS = ("greedy", "top_k", "top_p", "sample")


class SampleState(NamedTuple):
    """The strategy's state in the loop. `length` is `step + 1` (growing) or
    `max_decode_length + 1` (padded)."""

    ids: tf.Tensor  # int32: (active, length); pad_id after EOS
    log_probs: tf.Tensor  # float32: (active,) sum of the model's log-softmax of chosen tokens
    finished: tf.Tensor  # bool: (active,) EOS emitted or limit reached


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
    or `top_p_filter` keeps, ties with the last kept token included. With both off (the
    defaults of `translate_sample`) the logits come back as they are, without the sort (a
    `tf.cond`)."""
    top_k = tf.cast(top_k, tf.int32)
    top_p = tf.cast(top_p, logits.dtype)
    off = (top_k <= 0) & (top_p >= 1.0)
    return tf.cond(off, lambda: logits, lambda: _filter(logits, top_k, top_p))


def _filter(logits, top_k, top_p) -> tf.Tensor:
    """`filter_logits` with one of `top_k` (int32 scalar) and `top_p` (scalar) on, by one
    sort of each row."""
    vocab = tf.shape(logits)[-1]
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
    """

    method: str = "greedy"
    top_k: Any = 0
    top_p: Any = 1.0
    temperature: Any = 1.0
    seed: Any = (0, 0)

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
        if options.method == "top_k":
            scaled = top_k_filter(scaled, options.top_k)
        elif options.method == "top_p":
            scaled = top_p_filter(scaled, options.top_p)
        else:
            scaled = filter_logits(scaled, options.top_k, options.top_p)
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
