"""The one `tf.while_loop` of decoding. Beam search (`beam_search.BeamSearch`) and greedy or
sampled decoding (`sampling.Sampling`) are strategies: they choose tokens and keep their own
state; `decode` owns the rest (the loop, the buffers, dropping finished items, the outputs).

    strategy = BeamSearch(vocab_size, SearchOptions())  # the paper's beam 4, alpha 0.6
    ids, scores = decode(strategy, step, bos_ids, max_len, LoopOptions(eos_id=3))
    ids, log_probs = decode(Sampling(SamplingOptions("top_p", top_p=0.9, seed=(1, 2))),
                            step, bos_ids, max_len, LoopOptions(eos_id=3))

The search knows nothing about the model (TF Model Garden manner): a `StepFunction` holds
its initial `cache`, its `shared` state and

    logits, new_cache = step.fn(ids, step, cache, shared)

where `ids` is int32 `(rows, length)` (the hypotheses so far, `ids[:, step]` being the newest
token), `step` a scalar int32 tensor, `cache` the state the step function updates and
`shared` the state it only reads (encoder-decoder keys/values, the memory mask); it returns
float `(rows, vocab_size)` logits for the next token and the updated cache. A strategy keeps
`rows_per_item` rows per item (the beam; 1 for sampling), batch-major: row `b * k + i` is row
i of item b (`tile_beams` lays tensors out this way). `cache` and `shared` are given per item,
`(batch, ...)`. There are two designs (`incremental` builds one of each from a model):

Growing buffers (`LoopOptions(padded=False)`, production). Ids and cache grow by one
position per step (`tf.while_loop` with `None` shape invariants). The step function keeps its
cache and `shared` per item, `(active, ...)`, never tiled by `rows_per_item` (it groups its
rows by item itself); when the strategy re-ranks rows the loop calls
`step.reorder_cache(cache, parents)` with the int32 `(active, rows_per_item)` source row of
every new row within its item. An item whose results can no longer change
(`Strategy.item_done`) gains nothing from more steps: once at least `shrink_threshold` of the
live items are done (0: at every finished item), their rows are dropped from the live state
(the strategy's state, the limits, the cache and `shared`: one gather each, which is why it
is not done at every step). Their results go to full-batch `Outputs` at their original index
(`tf.tensor_scatter_nd_update`); the live items keep their order, so the step function sees
`(active * k, ...)` rows with `active` falling as items finish. A dropped item's results
could not have changed, so dropping returns the same ids and scores (tests/test_shrinking.py).
Where the strategy's stop is a heuristic (`Strategy.exact_stop` false: beam search's
one-step lookahead), a step could still change a done item, so the loop freezes each item's
state at the step it is first done (`LoopState.settled`): in both designs an item's results
are then what it gets alone, whatever its batch.

Fixed-size buffers (`LoopOptions(padded=True)`: static shapes, as XLA wants). The ids are
`max_decode_length + 1` long from the start; the step function writes its cache at position
`step`. The loop tiles `cache` and `shared` by `rows_per_item` once, reorders the cache's rows
with one `tf.gather` when the strategy re-ranks them (there is no `reorder_cache`), and drops
nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import tensorflow as tf

from keras_transformer.checks import check_number
from keras_transformer.constants import EOS_ID, PAD_ID

SymbolsToLogitsFn = Callable[..., "tuple[tf.Tensor, Any]"]  # (ids, step, cache, shared)
NEG_INF = float("-inf")  # log-probability of dead beams and of filtered tokens
SHRINK_THRESHOLD = 0.25  # drop finished items' rows once this fraction of live ones finished


@dataclass(frozen=True)
class LoopOptions:
    """How `decode` runs its loop, whatever the strategy.

    Args:
        eos_id: the end-of-sequence id.
        pad_id: fills the ids after EOS.
        padded: fixed-size buffers (static shapes, for XLA) instead of growing ones
            (`SearchOptions.padded_decode` at the translator's level); see the module
            docstring for the two designs.
        shrink_threshold: growing buffers: drop finished items' rows once at least this
            fraction of the live items has finished since the last drop, in [0, 1] (0: at
            every finish; 1: never, as a drop needs some items still decoding).
    """

    eos_id: int = EOS_ID
    pad_id: int = PAD_ID
    padded: bool = False
    shrink_threshold: float = SHRINK_THRESHOLD

    def __post_init__(self) -> None:
        check_number("shrink_threshold", self.shrink_threshold, minimum=0.0, maximum=1.0)

    def start_ids(self, ids, max_len) -> tf.Tensor:
        """`ids (..., 1)` holding the initial id -> `(..., max_len + 1)` when padded (with
        `pad_id`), else as is."""
        if not self.padded:
            return ids
        paddings = [[0, 0]] * (ids.shape.rank - 1) + [[0, max_len]]
        return tf.pad(ids, paddings, constant_values=self.pad_id)

    def grow(self, ids) -> tf.Tensor:
        """`ids (..., length)` kept from the step before -> `(..., length + 1)` (with
        `pad_id`) when growing, as they are when padded: beside the step's new ids."""
        if self.padded:
            return ids
        paddings = [[0, 0]] * (ids.shape.rank - 1) + [[0, 1]]
        return tf.pad(ids, paddings, constant_values=tf.cast(self.pad_id, ids.dtype))

    def write_token(self, ids, tokens, position) -> tf.Tensor:
        """Put `tokens (batch, k)` at `position` of `ids (batch, k, length)`: a new column
        when growing, in place when padded."""
        if not self.padded:
            return tf.concat([ids, tokens[:, :, None]], axis=2)  # -> (batch, k, length + 1)
        at = tf.equal(tf.range(tf.shape(ids)[2]), position)  # (length,)
        return tf.where(at[None, None, :], tokens[:, :, None], ids)  # (batch, k, length)


def length_limits(initial_ids, max_decode_length, max_lengths=None):
    """`(max_len () int32, limits (batch,) int32)`: per-item limits capped at the buffer."""
    max_len = tf.cast(max_decode_length, tf.int32)
    limits = tf.fill(tf.shape(initial_ids)[:1], max_len)  # (batch,)
    if max_lengths is not None:
        limits = tf.minimum(tf.cast(max_lengths, tf.int32), max_len)
    return max_len, limits


def tile_beams(tensor, beam_size: int) -> tf.Tensor:
    """`(batch, ...)` -> `(batch * beam_size, ...)`, each row repeated beam_size times."""
    return tf.repeat(tensor, beam_size, axis=0)  # -> (batch * beam, ...)


def tile_items(nest, rows_per_item: int):
    """Every tensor of `nest` `(batch, ...)` -> `(batch * rows_per_item, ...)`."""
    if rows_per_item == 1:
        return nest
    return tf.nest.map_structure(lambda t: tile_beams(t, rows_per_item), nest)


def growing_shape(tensor) -> tf.TensorShape:
    """Shape invariant of a cache tensor `(items, ..., d)` of growing buffers: items may be
    dropped and positions added; only the last dimension of a tensor of rank 2 or more stays
    fixed."""
    shape = tensor.shape
    if shape.rank < 2:
        return tf.TensorShape([None] * shape.rank)
    return tf.TensorShape([None] * (shape.rank - 1) + [shape[-1]])


def shrinking_shape(tensor) -> tf.TensorShape:
    """Shape invariant of a `(rows, ...)` loop variable whose rows may be dropped."""
    return tf.TensorShape([None]).concatenate(tensor.shape[1:])


def free_last_axis(tensor) -> tf.TensorShape:
    """Shape invariant of growing ids: the last (length) axis free."""
    return tf.TensorShape(tensor.shape[:-1] + [None])


class StepFunction(NamedTuple):
    """What `decode` needs from a model (see the module docstring)."""

    fn: SymbolsToLogitsFn  # (ids, step, cache, shared) -> (logits (rows, vocab), new cache)
    cache: Any  # nest of per-item (batch, ...) tensors, or an empty structure
    shared: Any  # nest of per-item (batch, ...) tensors the step only reads, or ()
    reorder_cache: Callable | None = None  # growing buffers: (cache, parents) -> cache


class Outputs(NamedTuple):
    """The results of a shrinking loop, by original item."""

    items: tf.Tensor  # int32: (active,) original item of each live row
    ids: tf.Tensor  # int32: (batch, ..., out_length); rows of dropped items are final
    scores: tf.Tensor  # float32: (batch, ...)


def initial_outputs(batch, ids_shape, scores_shape, pad_id: int) -> Outputs:
    """Empty `Outputs` for `batch` items: ids `(batch, *ids_shape)`, scores
    `(batch, *scores_shape)` (every item is stored before the end, so the contents only
    fill the shape)."""
    ids_shape = tf.concat([[batch], tf.constant(ids_shape, tf.int32)], 0)
    scores_shape = tf.concat([[batch], tf.constant(scores_shape, tf.int32)], 0)
    return Outputs(
        items=tf.range(batch),
        ids=tf.fill(ids_shape, tf.constant(pad_id, tf.int32)),  # (batch, *ids_shape)
        scores=tf.zeros(scores_shape),  # (batch, *scores_shape)
    )


def outputs_shape(outputs: Outputs) -> Outputs:
    """Shape invariants of `Outputs` in a loop: fewer live items, longer stored ids."""
    return Outputs(tf.TensorShape([None]), free_last_axis(outputs.ids), outputs.scores.shape)


def store(outputs: Outputs, rows, ids, scores, pad_id: int) -> Outputs:
    """Write the final `ids (n, ..., length)` and `scores (n, ...)` of live `rows (n,)` to
    their items' places; the stored ids are padded with `pad_id` to `length` first."""
    width = tf.shape(ids)[-1]
    out_ids = outputs.ids
    rank = out_ids.shape.rank
    extra = tf.maximum(width - tf.shape(out_ids)[-1], 0)
    out_ids = tf.pad(out_ids, [[0, 0]] * (rank - 1) + [[0, extra]], constant_values=pad_id)
    index = tf.gather(outputs.items, rows)[:, None]  # (n, 1) original items
    return outputs._replace(
        ids=tf.tensor_scatter_nd_update(out_ids, index, ids),  # (batch, ..., length)
        scores=tf.tensor_scatter_nd_update(outputs.scores, index, scores),
    )


def should_compact(done, threshold: float) -> tf.Tensor:
    """Drop the rows of finished items now? `done` bool `(active,)`: yes when at least
    `threshold` of them (and at least one) finished and some are still decoding."""
    count = tf.reduce_sum(tf.cast(done, tf.int32))
    active = tf.size(done)
    enough = tf.cast(count, tf.float32) >= threshold * tf.cast(active, tf.float32)
    return (count > 0) & (count < active) & enough


def row_index(mask) -> tf.Tensor:
    """int32 `(n,)` positions where the bool `(active,)` mask is true."""
    return tf.cast(tf.where(mask)[:, 0], tf.int32)


def gather_rows(nest, rows):
    """Every tensor of `nest` `(rows, ...)` -> `(len(rows), ...)`."""
    return tf.nest.map_structure(lambda t: tf.gather(t, rows, axis=0), nest)


class StepContext(NamedTuple):
    """What `Strategy.advance` knows of the loop besides its own state."""

    step: tf.Tensor  # int32: () tokens generated before this step
    limits: tf.Tensor  # int32: (active,) per-item length limits
    items: Any  # growing buffers: int32 (active,) original item of each live one; else None
    batch: tf.Tensor  # int32: () the original batch size


class Strategy:
    """How a search chooses its tokens and keeps its state; `decode` runs the loop.

    A strategy keeps `rows_per_item` rows per item: the step function reads its
    `decoder_ids`, `(active * rows_per_item, length)`, batch-major. Its state is a NamedTuple
    whose fields are all `(active, ...)` (so that dropping finished items is one gather per
    field); the fields named in `growing` end in the length axis, one column longer after
    each step unless the loop is padded.
    """

    rows_per_item: int = 1
    growing: tuple[str, ...] = ()
    # Whether `item_done` is exact: once an item is done its results never change (true of
    # every strategy but beam search's one-step lookahead, `SearchOptions(stop_lookahead=
    # "next")`). Where it is not, the loop freezes an item's state at the step it is first
    # done, so that neither its batch (growing buffers drop items only in groups) nor the
    # design (fixed buffers drop none) changes its results.
    exact_stop: bool = True

    def result_shapes(self) -> tuple[list[int], list[int]]:
        """The shapes of one item's ids (with a length of 1) and scores in `results`."""
        raise NotImplementedError

    def initial_state(self, initial_ids, limits, max_len, loop: LoopOptions):
        """The state before the first step, for int32 `initial_ids (batch,)` (the first token
        of every row), int32 `limits (batch,)` and the length of padded buffers `max_len`."""
        raise NotImplementedError

    def decoder_ids(self, state) -> tf.Tensor:
        """int32 `(active * rows_per_item, length)`: the ids the step function reads."""
        raise NotImplementedError

    def advance(self, state, logits, at: StepContext, loop: LoopOptions):
        """One step from the step function's `logits (active * rows_per_item, vocab)`:
        `(new_state, reorder)`, where `reorder` int32 `(active, rows_per_item)` gives the old
        row of every new one (the cache is gathered by it), or None if rows stay in place."""
        raise NotImplementedError

    def item_done(self, state, step, limits) -> tf.Tensor:
        """bool `(active,)`: the items whose results later steps cannot change, after `step`
        tokens with int32 `limits (active,)`. The loop ends once every item is done."""
        raise NotImplementedError

    def results(self, state, rows=None) -> tuple[tf.Tensor, tf.Tensor]:
        """`(ids (n, *ids_shape), scores (n, *scores_shape))` of every item, or of the items
        at int32 `rows (n,)`."""
        raise NotImplementedError


class LoopState(NamedTuple):
    """The `tf.while_loop` state. `active` is the batch, or with growing buffers the items not
    dropped yet; `k` is the strategy's `rows_per_item`."""

    step: tf.Tensor  # int32: () tokens generated so far
    search: Any  # the strategy's state, a NamedTuple of (active, ...) tensors
    cache: Any  # growing: nest of (active, ...) tensors; fixed: (batch * k, ...)
    limits: tf.Tensor  # int32: (active,) per-item length limits
    shared: Any  # growing: nest of (active, ...) per-item tensors; fixed: () (captured)
    outputs: Any  # growing: Outputs of the strategy's `result_shapes`; fixed: ()
    settled: tf.Tensor  # bool: (active,) done at this or an earlier step (`item_done`)


class _Loop:
    """One run of `decode`: the body and condition of its `tf.while_loop`."""

    def __init__(self, strategy: Strategy, step: StepFunction, loop: LoopOptions, batch):
        self.strategy, self.loop, self.batch = strategy, loop, batch  # batch: int32 ()
        self.reorder_cache = step.reorder_cache
        self.fn = step.fn
        if loop.padded:  # `shared` tiled once, captured; the cache's rows are gathered
            shared = tile_items(step.shared, strategy.rows_per_item)
            self.fn = lambda ids, at, cache, _: step.fn(ids, at, cache, shared)

    def initial_state(self, initial_ids, step: StepFunction, limits, max_len,
                      start_step=None) -> LoopState:  # fmt: skip
        """The state before the first step: with fixed buffers the cache is tiled to the
        strategy's rows, with growing ones `shared` is carried (its rows are dropped)."""
        cache, shared, outputs = step.cache, step.shared, ()
        if self.loop.padded:
            cache, shared = tile_items(cache, self.strategy.rows_per_item), ()
        else:
            outputs = initial_outputs(self.batch, *self.strategy.result_shapes(), self.loop.pad_id)
        step_ = tf.constant(0, tf.int32) if start_step is None else tf.cast(start_step, tf.int32)
        search = self.strategy.initial_state(initial_ids, limits, max_len, self.loop)
        return LoopState(
            step=step_,
            search=search,
            cache=cache,
            limits=limits,
            shared=shared,
            outputs=outputs,
            settled=self.strategy.item_done(search, step_, limits),  # (batch,)
        )

    def body(self, state: LoopState) -> LoopState:
        ids = self.strategy.decoder_ids(state.search)  # (active * k, length)
        logits, cache = self.fn(ids, state.step, state.cache, state.shared)
        items = None if self.loop.padded else state.outputs.items
        at = StepContext(state.step, state.limits, items, self.batch)
        search, reorder = self.strategy.advance(state.search, logits, at, self.loop)
        if not self.strategy.exact_stop:  # a settled item keeps its state: its results
            search = self.freeze(state.settled, state.search, search)
        step = state.step + 1
        settled = state.settled | self.strategy.item_done(search, step, state.limits)
        state = state._replace(step=step, search=search, settled=settled)  # settled: (active,)
        if self.loop.padded:
            if reorder is not None:
                cache = gather_rows(cache, tf.reshape(reorder, [-1]))  # -> (batch * k, ...)
            return state._replace(cache=cache)
        if reorder is not None:
            first = tf.range(tf.shape(reorder)[0])[:, None] * self.strategy.rows_per_item
            cache = self.reorder_cache(cache, reorder - first)  # parents within each item
        state = state._replace(cache=cache)
        compact = should_compact(settled, self.loop.shrink_threshold)
        return tf.cond(compact, lambda: self.drop(state, settled), lambda: state)

    def freeze(self, settled, old, new):
        """The strategy's state `new`, with the rows of the `settled` items (bool `(active,)`)
        taken from `old` (its growing fields padded by one column first)."""
        fields = []
        for name, before, after in zip(old._fields, old, new):
            if name in self.strategy.growing:
                before = self.loop.grow(before)  # growing: -> one column longer
            keep = tf.reshape(settled, [-1] + [1] * (after.shape.rank - 1))  # (active, 1, ...)
            fields.append(tf.where(keep, before, after))
        return type(new)(*fields)

    def drop(self, state: LoopState, done) -> LoopState:
        """Store the results of the `done` items (bool `(active,)`) and drop their rows; the
        kept items keep their order."""
        gone, kept = row_index(done), row_index(tf.logical_not(done))  # (gone,), (kept,)
        ids, scores = self.strategy.results(state.search, gone)
        outputs = store(state.outputs, gone, ids, scores, self.loop.pad_id)
        return state._replace(
            search=gather_rows(state.search, kept),  # each (kept, ...)
            cache=gather_rows(state.cache, kept),  # each (kept, ...)
            limits=tf.gather(state.limits, kept),  # (kept,)
            shared=gather_rows(state.shared, kept),  # each (kept, ...)
            outputs=outputs._replace(items=tf.gather(outputs.items, kept)),  # (kept,)
            settled=tf.gather(state.settled, kept),  # (kept,)
        )

    def keep_going(self, state: LoopState) -> tf.Tensor:
        """False once every item is settled (`maximum_iterations` bounds the rest)."""
        return tf.logical_not(tf.reduce_all(state.settled))

    def results(self, state: LoopState) -> tuple[tf.Tensor, tf.Tensor]:
        """The strategy's `results` of the final state, for the whole batch."""
        ids, scores = self.strategy.results(state.search)
        if self.loop.padded:
            return ids, scores
        rows = tf.range(tf.shape(ids)[0])
        outputs = store(state.outputs, rows, ids, scores, self.loop.pad_id)
        return outputs.ids, outputs.scores

    def invariants(self, state: LoopState) -> LoopState:
        """Shape invariants: static with fixed buffers; else every per-item tensor free on its
        first axis, and the `growing` fields of the strategy's state and the cache free on
        their length axis too."""
        invariants = tf.nest.map_structure(lambda t: t.shape, state)
        if self.loop.padded:
            return invariants
        search = [
            free_last_axis(t) if name in self.strategy.growing else t.shape
            for name, t in zip(state.search._fields, state.search)
        ]
        search = [tf.TensorShape([None]).concatenate(shape[1:]) for shape in search]
        return invariants._replace(
            search=type(state.search)(*search),
            cache=tf.nest.map_structure(growing_shape, state.cache),
            limits=tf.TensorShape([None]),
            shared=tf.nest.map_structure(shrinking_shape, state.shared),
            outputs=outputs_shape(state.outputs),
            settled=tf.TensorShape([None]),
        )


def check_design(step: StepFunction, loop: LoopOptions) -> None:
    """Growing buffers need the step's `reorder_cache`; fixed ones reorder rows by gather."""
    if loop.padded and step.reorder_cache is not None:
        raise ValueError(
            "A step function with reorder_cache keeps its state per item: it needs growing "
            "buffers, LoopOptions(padded=False). Received: padded=True"
        )
    if not loop.padded and step.reorder_cache is None:
        raise ValueError(
            "Growing buffers need a step function with per-item state and its reorder_cache "
            "(incremental.per_source_step). Received: reorder_cache=None"
        )


def decode(
    strategy: Strategy,
    step: StepFunction,
    initial_ids,
    max_decode_length,
    loop: LoopOptions | None = None,
    *,
    max_lengths=None,
    start_step=None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Batched decoding with `strategy`; see the module docstring for the protocol.

    Runs eagerly, inside `tf.function`, and (with `loop.padded`) under `jit_compile=True`.
    Only stock TensorFlow ops: exportable to a SavedModel for TF Serving.

    Args:
        strategy: how tokens are chosen, e.g. `BeamSearch(vocab_size, SearchOptions())` or
            `Sampling(SamplingOptions("top_k", top_k=10))`.
        step: the model's `StepFunction` for the loop's design (`incremental.per_source_step`
            for growing buffers, `incremental.fixed_shape_step` for fixed ones).
        initial_ids: int `(batch,)`, the first token of every row (BOS).
        max_decode_length: int or scalar int tensor, the most tokens a row may generate (EOS
            included). With `loop.padded` it is the size of the id buffers and must be static
            under XLA (a Python int, or computed from static shapes).
        loop: `LoopOptions` (EOS and padding ids, the design, dropping finished items);
            default `LoopOptions()`, the project's special ids and growing buffers.
        max_lengths: optional int `(batch,)`, per-item limits `<= max_decode_length`; a row
            reaching its item's limit without EOS is finished there.
        start_step: optional int32 scalar, the tokens every row holds when the loop starts
            (the step function's cache and the strategy's state already hold them, as after
            `prefill.fill_cache`); default 0.

    Returns:
        The strategy's `(ids, scores)` for the whole batch: ids int32 `(batch, ...,
        length + 1)` with the initial id at position 0 and `pad_id` after EOS, where `length`
        is the number of steps run (growing buffers) or `max_decode_length` (fixed).
    """
    loop = loop or LoopOptions()
    check_design(step, loop)
    initial_ids = tf.cast(tf.convert_to_tensor(initial_ids), tf.int32)
    max_len, limits = length_limits(initial_ids, max_decode_length, max_lengths)
    run = _Loop(strategy, step, loop, tf.shape(initial_ids)[0])
    state = run.initial_state(initial_ids, step, limits, max_len, start_step)
    final = tf.while_loop(
        run.keep_going,
        lambda s: (run.body(s),),
        (state,),
        shape_invariants=(run.invariants(state),),
        maximum_iterations=max_len,
    )[0]
    return run.results(final)
