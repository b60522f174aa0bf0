"""Incremental (cached) decoding with the trained layers of a `Transformer` model.

The encoder runs once per batch; `init_cache` projects the encoder-decoder keys/values once per
source; those and the memory mask are tiled by beam once and captured by the step function,
which feeds one token per step through `Transformer.decode`, so a step costs
O(current length) (attention over the cached keys), never a re-run of the decoder.

    fn, cache = incremental_decoder(model, memory, memory_mask, beam_size=4)
    ids, scores = beam_search(fn, bos_ids, cache, vocab_size, 4, 0.6, max_len, eos_id)
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.decoding.beam_search import tile_beams
from keras_transformer.decoding.loop import SymbolsToLogitsFn
from keras_transformer.model import Transformer


def incremental_decoder(
    model: Transformer,
    memory,
    memory_mask,
    beam_size: int = 1,
    max_decode_length=None,
) -> tuple[SymbolsToLogitsFn, list]:
    """The `symbols_to_logits_fn` of `beam_search` / `sample` for `model`, and its cache.

    Args:
        model: a `Transformer`.
        memory: encoder output `(batch, src_len, d_model)` from `model.encode`.
        memory_mask: boolean `(batch, src_len)`.
        beam_size: rows per source the search will use (1 for `sample`).
        max_decode_length: None for a growing self-attention cache; an int (or scalar tensor,
            static under XLA) for fixed `(batch, h, max_decode_length, d_k)` buffers written at
            position `step` (`padded_decode=True`).

    Returns:
        `(symbols_to_logits_fn, initial_cache)`. The cache is the per-layer list of
        self-attention `{"key", "value"}` dicts, per source `(batch, h, len, d_k)`: the search
        tiles it by beam and reorders it. The encoder-decoder keys/values `(batch * beam, h,
        src_len, d_k)` and the mask `(batch * beam, src_len)` live in the closure, tiled once.
    """
    cache = model.init_cache(memory, max_length=max_decode_length)  # per source
    cross = [
        tf.nest.map_structure(lambda t: tile_beams(t, beam_size), layer["cross"]) for layer in cache
    ]  # each: (batch * beam, h, src_len, d_k)
    mask = tile_beams(memory_mask, beam_size)  # -> (batch * beam, src_len)
    padded = max_decode_length is not None

    def symbols_to_logits_fn(ids, step, self_cache):
        # newest token -> (batch * beam, 1); a gather, not ids[:, step:step + 1], whose
        # dynamic bounds XLA cannot size statically
        tokens = tf.gather(ids, tf.reshape(step, [1]), axis=1)
        layer_caches = [{"self": s, "cross": c} for s, c in zip(self_cache, cross)]
        logits, new_cache = model.decode(
            tokens, mask, layer_caches, cache_update_index=step if padded else None
        )  # logits: (batch * beam, 1, vocab)
        return logits[:, 0, :], [layer["self"] for layer in new_cache]

    if tf.executing_eagerly():  # one graph call per step instead of eager layer calls
        symbols_to_logits_fn = tf.function(symbols_to_logits_fn, reduce_retracing=True)
    return symbols_to_logits_fn, [layer["self"] for layer in cache]
