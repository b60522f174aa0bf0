"""Incremental (cached) decoding with the trained layers of a `Transformer` model.

The encoder runs once per batch; `init_cache` projects the encoder-decoder keys/values once per
source. The step function feeds one token per step through `Transformer.decode`, so a step
costs O(current length) (attention over the cached keys), never a re-run of the decoder.

`per_item_decoder` (what `translator` decodes with in growing mode) keeps the whole state per
source: the encoder-decoder keys/values are never tiled by beam (the beams of a source attend
to them together), and each self-attention key/value stays where it was written: re-ranking
the beams only updates which beam slot holds each position of each hypothesis ("slots"), so
no step copies the cache to reorder it (the loop's `reorder_cache`).

`incremental_decoder_with_shared` hands the encoder-decoder keys/values and the memory mask to
the search as per-item `shared` state (tiled by beam there, once), so the search can drop the
rows of finished items; `incremental_decoder` tiles them itself and captures them (the
three-argument protocol).

    beam = BeamSearch(vocab_size, SearchOptions(beam_size=4))
    fn, cache, shared = incremental_decoder_with_shared(model, memory, memory_mask)
    ids, scores = decode(beam, fn, bos_ids, cache, max_len, shared=shared)
    fn, cache = incremental_decoder(model, memory, memory_mask, beam_size=4)
    ids, scores = decode(beam, fn, bos_ids, cache, max_len)
    step = per_item_decoder(model, memory, memory_mask, beam_size=4)
    ids, scores = decode(beam, step.fn, bos_ids, step.cache, max_len, shared=step.shared,
                         reorder_cache=step.reorder_cache)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from keras_transformer.decoding.loop import SymbolsToLogitsFn, tile_beams
from keras_transformer.layers import slot_cache
from keras_transformer.model import Transformer


def incremental_decoder_with_shared(
    model: Transformer, memory, memory_mask, max_decode_length=None, rows_per_item: int = 1
) -> tuple[SymbolsToLogitsFn, list, dict]:
    """The four-argument `symbols_to_logits_fn(ids, step, cache, shared)` of `loop.decode`
    (beam search or sampling) for `model`, its cache and its per-item shared state.

    Args:
        model: a `Transformer`.
        memory: encoder output `(batch, src_len, d_model)` from `model.encode`.
        memory_mask: boolean `(batch, src_len)`.
        max_decode_length: None for a growing self-attention cache; an int (or scalar tensor,
            static under XLA) for fixed `(batch, h, max_decode_length, d_k)` buffers written at
            position `step` (`padded_decode=True`).
        rows_per_item: rows the search will give each source (its beam; 1 for sampling):
            with `PAD_MIN_ROWS` rows or more the step's kernels are padded (`_layer_kernels`;
            never with `max_decode_length`).

    Returns:
        `(symbols_to_logits_fn, initial_cache, shared)`. The cache is the per-layer list of
        self-attention `{"key", "value"}` dicts, per source `(batch, h, len, d_k)`: the search
        tiles it by beam and reorders it. `shared` is `{"cross": per-layer {"key", "value"}
        (batch, h, src_len, d_k), "mask": (batch, src_len)}`, per source: pass it as the
        search's `shared`, which tiles it by beam and never reorders it.
    """
    cache = model.init_cache(memory, max_length=max_decode_length)  # per source
    output_kernel = _output_kernel(model)
    shared = {"cross": [layer["cross"] for layer in cache], "mask": memory_mask}
    padded = max_decode_length is not None
    if padded:  # XLA's static shapes: no `tf.cond` between kernels of two widths
        kernels = [None] * len(model.decoder.layers)
    else:
        kernels = _layer_kernels(model, tf.shape(memory)[0] * rows_per_item)

    def symbols_to_logits_fn(ids, step, self_cache, shared):
        # newest token -> (rows, 1); a gather, not ids[:, step:step + 1], whose dynamic
        # bounds XLA cannot size statically
        tokens = tf.gather(ids, tf.reshape(step, [1]), axis=1)
        layer_caches = [
            {"self": s, "cross": c, "kernels": k}
            for s, c, k in zip(self_cache, shared["cross"], kernels)
        ]
        logits, new_cache = model.decode(
            tokens,
            shared["mask"],
            layer_caches,
            cache_update_index=step if padded else None,
            output_kernel=output_kernel,
        )  # logits: (rows, 1, vocab)
        return logits[:, 0, :], [layer["self"] for layer in new_cache]

    if tf.executing_eagerly():  # one graph call per step instead of eager layer calls
        symbols_to_logits_fn = tf.function(symbols_to_logits_fn, reduce_retracing=True)
    return symbols_to_logits_fn, [layer["self"] for layer in cache], shared


def incremental_decoder(
    model: Transformer,
    memory,
    memory_mask,
    beam_size: int = 1,
    max_decode_length=None,
) -> tuple[SymbolsToLogitsFn, list]:
    """The three-argument `symbols_to_logits_fn(ids, step, cache)` for `model`, and its cache.

    Args:
        model, memory, memory_mask, max_decode_length: as in
            `incremental_decoder_with_shared`.
        beam_size: rows per source the search will use (1 for `Sampling`).

    Returns:
        `(symbols_to_logits_fn, initial_cache)`, the cache as in
        `incremental_decoder_with_shared`. The encoder-decoder keys/values `(batch * beam, h,
        src_len, d_k)` and the mask `(batch * beam, src_len)` live in the closure, tiled once
        (so the search cannot drop finished items' rows of them: it does not shrink).
    """
    fn, cache, shared = incremental_decoder_with_shared(
        model, memory, memory_mask, max_decode_length, beam_size
    )
    tiled = tf.nest.map_structure(lambda t: tile_beams(t, beam_size), shared)  # (b * beam, ...)

    def symbols_to_logits_fn(ids, step, self_cache):
        return fn(ids, step, self_cache, tiled)

    return symbols_to_logits_fn, cache


PRETRANSPOSE_OUTPUT = True  # A/B switch of `benchmarks/run.py decode ab` ("rows" vs "rows+T")
# None: `onednn.padded_kernels_faster()`; True/False fix it (`decode ab`'s "+P" designs)
PAD_KERNELS: bool | None = None
# A search pads only with at least this many rows (items x beam) at its start: the copy
# (~10 ms for base on 2 cores) costs more than it saves below. `decode ab`, capped to AVX2:
# 4 rows 0.93-0.97x, 32 rows 0.97-1.02x, 64 rows 1.05-1.06x, 128 rows 1.10x.
PAD_MIN_ROWS = 64


def _output_kernel(model: Transformer):
    """The pre-softmax projection `(d_model, vocab)`, transposed once per search (outside the
    loop), or None (transposed at every step) when `PRETRANSPOSE_OUTPUT` is off."""
    return model.token_embedding.output_kernel() if PRETRANSPOSE_OUTPUT else None


PAD_KERNELS_ENV = "KERAS_TRANSFORMER_PAD_KERNELS"  # "1" or "0": overrides the CPU rule


def pad_kernels() -> bool:
    """Whether this process's searches multiply by the decoder's kernels padded
    (`layers.padded_dense`): `PAD_KERNELS` if set, else `KERAS_TRANSFORMER_PAD_KERNELS=1|0`
    if set (an export traced on one machine for servers of another kind), else
    `onednn.padded_kernels_faster()`."""
    if PAD_KERNELS is not None:
        return PAD_KERNELS
    value = os.environ.get(PAD_KERNELS_ENV)
    if value is not None:
        if value not in ("0", "1"):
            raise ValueError(f"{PAD_KERNELS_ENV} must be 0 or 1. Received: {value!r}")
        return value == "1"
    from keras_transformer import onednn

    return onednn.padded_kernels_faster()


def _layer_kernels(model: Transformer, rows) -> list:
    """Per decoder layer, its weights for the step (`DecoderLayer.kernels`): padded once per
    search when `pad_kernels()` and the search has at least `PAD_MIN_ROWS` rows (int32
    scalar `rows`, a `tf.cond`), else as they are (no copy); None per layer when
    `pad_kernels()` is off."""
    layers = model.decoder.layers
    if not pad_kernels():
        return [None] * len(layers)
    return tf.cond(
        rows >= PAD_MIN_ROWS,
        lambda: [layer.kernels() for layer in layers],
        lambda: [layer.kernels(pad=0) for layer in layers],
    )


class StepFunction(NamedTuple):
    """What `loop.decode` needs from a model: the step function, its initial cache, its
    per-item `shared` state and, for a per-item cache, `reorder_cache`."""

    fn: SymbolsToLogitsFn  # (ids, step, cache, shared) -> (logits, new cache)
    cache: Any
    shared: Any
    reorder_cache: Callable | None = None


DEFAULT_RECENT_POSITIONS = 16  # chosen by `benchmarks/run.py decode ab` (benchmarks/README)
RECENT_POSITIONS = DEFAULT_RECENT_POSITIONS  # the recent part is merged every this many steps


def empty_slot_cache(items, layer, beam: int) -> dict:
    """A decoder layer's `slot_cache` before the first step: each part `(items, h, 0, beam,
    d)`, in the layer's compute dtype."""
    attn = layer.self_attention
    depths = {"key": attn.key_dim, "value": attn.value_dim}
    depths.update({f"recent_{name}": depth for name, depth in depths.items()})
    shape = lambda depth: [items, attn.num_heads, 0, beam, depth]  # noqa: E731
    return {name: tf.zeros(shape(d), layer.compute_dtype) for name, d in depths.items()}


def merge_recent(caches: list, recent_positions: int | None = None) -> list:
    """Move the recent part of every layer's `slot_cache` to the end of its older part once it
    holds `recent_positions` (default `RECENT_POSITIONS`): one `tf.cond` for all layers."""
    recent_positions = RECENT_POSITIONS if recent_positions is None else recent_positions

    def merged(cache):
        return {
            "key": tf.concat([cache["key"], cache["recent_key"]], axis=2),
            "value": tf.concat([cache["value"], cache["recent_value"]], axis=2),
            "recent_key": cache["recent_key"][:, :, :0],
            "recent_value": cache["recent_value"][:, :, :0],
        }

    full = tf.shape(caches[0]["recent_key"])[2] >= recent_positions
    return tf.cond(full, lambda: [merged(c) for c in caches], lambda: [dict(c) for c in caches])


def reorder_slots(cache: dict, parents) -> dict:
    """`reorder_cache` of `per_item_decoder`: the hypothesis now in beam q of an item
    continues the one in beam `parents[:, q]` (int32 `(items, beam)`), so its positions live
    where that one's did. Only the int32 slots move, `(items, t, beam)`."""
    slots = tf.gather(cache["slots"], parents, axis=2, batch_dims=1)  # (items, t, beam)
    return {**cache, "slots": slots}


def per_item_decoder(model: Transformer, memory, memory_mask, beam_size: int) -> StepFunction:
    """The step function of `loop.decode` with a per-item, growing cache (`reorder_cache`).

    Args:
        model: a `Transformer`.
        memory: encoder output `(items, src_len, d_model)` from `model.encode`.
        memory_mask: boolean `(items, src_len)`.
        beam_size: rows per item of the strategy (its `rows_per_item`; 1 for `Sampling`).

    Returns:
        A `StepFunction`. Its cache is `{"slots": (items, t, beam) int32, "layers": per-layer
        `layers.slot_cache` keys/values}`: at each step every row writes its new key/value at
        position t in its own beam slot, and `slots[:, s, q]` says which slot holds position
        s of the hypothesis in beam q. `shared` is `{"cross": per-layer {"key", "value"}
        (items, h, src_len, d_k), "mask": (items, src_len)}`: read by all beams of an item
        at once, never tiled.
    """
    layers = model.init_cache(memory)  # cross: projected once
    shared = {"cross": [layer["cross"] for layer in layers], "mask": memory_mask}
    items = tf.shape(memory)[0]

    cache = {
        "slots": tf.zeros([items, 0, beam_size], tf.int32),  # (items, 0, beam)
        "layers": [empty_slot_cache(items, layer, beam_size) for layer in model.decoder.layers],
    }
    output_kernel = _output_kernel(model)
    kernels = _layer_kernels(model, items * beam_size)
    own = tf.range(beam_size, dtype=tf.int32)[None, None, :]  # (1, 1, beam): row q in slot q

    def symbols_to_logits_fn(ids, step, cache, shared):
        items = tf.shape(cache["slots"])[0]
        slots = tf.concat([cache["slots"], tf.tile(own, [items, 1, 1])], 1)  # (items, t+1, b)
        ancestors = slot_cache.ancestor_mask(slots, beam_size)  # the same for every layer
        layer_caches = [
            {"self": {**kv, "ancestors": ancestors}, "cross": cross, "kernels": k}
            for kv, cross, k in zip(cache["layers"], shared["cross"], kernels)
        ]
        logits, new_cache = model.decode(
            ids[:, -1:], shared["mask"], layer_caches, output_kernel=output_kernel
        )
        new_layers = merge_recent(
            [{n: layer["self"][n] for n in slot_cache.NAMES} for layer in new_cache]
        )
        return logits[:, 0, :], {"slots": slots, "layers": new_layers}  # (items * beam, vocab)

    if tf.executing_eagerly():  # one graph call per step instead of eager layer calls
        symbols_to_logits_fn = tf.function(symbols_to_logits_fn, reduce_retracing=True)
    return StepFunction(symbols_to_logits_fn, cache, shared, reorder_slots)
