"""Incremental (cached) decoding with the trained layers of a `Transformer` model.

The encoder runs once per batch; `init_cache` projects the encoder-decoder keys/values once per
source. The step function feeds one token per step through `Transformer.decode`, so a step
costs O(current length) (attention over the cached keys), never a re-run of the decoder.

`incremental_decoder_with_shared` hands the encoder-decoder keys/values and the memory mask to
the search as per-item `shared` state (tiled by beam there, once), so the search can drop the
rows of finished items; `incremental_decoder` tiles them itself and captures them (the
three-argument protocol).

    beam = BeamSearch(vocab_size, SearchOptions(beam_size=4))
    fn, cache, shared = incremental_decoder_with_shared(model, memory, memory_mask)
    ids, scores = decode(beam, fn, bos_ids, cache, max_len, shared=shared)
    fn, cache = incremental_decoder(model, memory, memory_mask, beam_size=4)
    ids, scores = decode(beam, fn, bos_ids, cache, max_len)
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.decoding.loop import SymbolsToLogitsFn, tile_beams
from keras_transformer.model import Transformer


def incremental_decoder_with_shared(
    model: Transformer, memory, memory_mask, max_decode_length=None
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

    Returns:
        `(symbols_to_logits_fn, initial_cache, shared)`. The cache is the per-layer list of
        self-attention `{"key", "value"}` dicts, per source `(batch, h, len, d_k)`: the search
        tiles it by beam and reorders it. `shared` is `{"cross": per-layer {"key", "value"}
        (batch, h, src_len, d_k), "mask": (batch, src_len)}`, per source: pass it as the
        search's `shared`, which tiles it by beam and never reorders it.
    """
    cache = model.init_cache(memory, max_length=max_decode_length)  # per source
    shared = {"cross": [layer["cross"] for layer in cache], "mask": memory_mask}
    padded = max_decode_length is not None

    def symbols_to_logits_fn(ids, step, self_cache, shared):
        # newest token -> (rows, 1); a gather, not ids[:, step:step + 1], whose dynamic
        # bounds XLA cannot size statically
        tokens = tf.gather(ids, tf.reshape(step, [1]), axis=1)
        layer_caches = [{"self": s, "cross": c} for s, c in zip(self_cache, shared["cross"])]
        logits, new_cache = model.decode(
            tokens, shared["mask"], layer_caches, cache_update_index=step if padded else None
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
        model, memory, memory_mask, max_decode_length
    )
    tiled = tf.nest.map_structure(lambda t: tile_beams(t, beam_size), shared)  # (b * beam, ...)

    def symbols_to_logits_fn(ids, step, self_cache):
        return fn(ids, step, self_cache, tiled)

    return symbols_to_logits_fn, cache
