"""The two cached decoding designs of a `Transformer`, as `loop.StepFunction`s.

The encoder runs once per batch; the encoder-decoder keys/values are projected once per
source (`Transformer.init_cache`). Each step feeds one token per row through the decoder, so
a step costs O(current length) (attention over the cached keys), never a re-run of the
decoder.

- `per_source_step` (production, growing buffers): all state is kept per source. The
  encoder-decoder keys/values are read by the beams of a source together, never tiled by
  beam, and each self-attention key/value stays where it was written (`slot_cache`): when the
  search re-ranks beams only the int32 slots move (`reorder_cache`), no step copies the cache.
  The step is computed from the model's layers by `per_source.decoder_step`.
- `fixed_shape_step` (XLA, `SearchOptions.padded_decode`): a row per hypothesis through
  `Transformer.decode`'s plain cache, fixed `(rows, h, max_decode_length, d_k)` buffers
  written at position `step`, reordered by the loop with one gather: static shapes.

    step = per_source_step(model, memory, memory_mask, beam_size=4)
    ids, scores = decode(BeamSearch(vocab, SearchOptions()), step, bos_ids, max_len, loop)
    step = fixed_shape_step(model, memory, memory_mask, max_len)
    ids, scores = decode(strategy, step, bos_ids, max_len, LoopOptions(padded=True))

Both transpose the pre-softmax projection once per search, outside the loop
(`SharedEmbedding.output_kernel`), not at every step; under XLA, where it pays (large kernels,
some CPUs: `transposed_kernels_pay`), the fixed step instead reads every decoder kernel and the
embedding in `(out, in)` order (`fixed_shape_step(..., transpose_kernels=True)`).
"""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf

from keras_transformer import onednn
from keras_transformer.checks import env_switch
from keras_transformer.decoding import padded_kernels, per_source, slot_cache
from keras_transformer.decoding.loop import StepFunction
from keras_transformer.model import Transformer
from keras_transformer.tracing import graph_function

# Under XLA a product of a few rows (one token per hypothesis) by a `(in, out)` kernel runs at a
# speed that depends on the CPU, not on its instruction set (`--xla_cpu_max_isa=AVX2` changes
# nothing): reading every decoder kernel through its `(out, in)` transpose was faster at
# d_model 512 and 1024 on an AVX2-only AMD EPYC, slower at every size on an AMD EPYC Zen 4
# with AVX-512, and the same within noise at batch 64. So the rule: d_model of at least 512
# on a CPU without AVX-512, the one kind of CPU where it was faster; an extrapolation for
# CPUs not measured (Intel's), which the variable overrides. The figures:
# benchmarks/results/2026-11-26-issue-54-bfloat16-export-and-latency.md, "The decoder's
# weights in (out, in) order under XLA", and 2026-11-27-issue-54-kernel-layout.md.
TRANSPOSE_MIN_D_MODEL = 512
ENV_VAR = "KERAS_TRANSFORMER_TRANSPOSE_KERNELS"  # "1" or "0": overrides the rule


def transposed_kernels_pay(d_model: int, cpu_flags: set[str] | None = None) -> bool:
    """Whether an XLA search of a model of width `d_model` should multiply by transposed
    kernels:
    `KERAS_TRANSFORMER_TRANSPOSE_KERNELS=1|0` if set (an export traced on one kind of machine
    for servers of another), else the rule above: d_model of at least `TRANSPOSE_MIN_D_MODEL`
    on an x86-64 CPU without AVX-512 (`cpu_flags`, default this machine's), never with a
    GPU (not measured)."""
    override = env_switch(ENV_VAR)
    if override is not None:
        return override
    if d_model < TRANSPOSE_MIN_D_MODEL:
        return False
    if cpu_flags is None:
        if tf.config.list_logical_devices("GPU"):
            return False
        cpu_flags = onednn.cpu_flags()
    return "avx2" in cpu_flags and "avx512f" not in cpu_flags


def transposed_kernels(model: Transformer) -> list:
    """`[(kernel variable, its transpose (units, in))]` for every `Dense` a decoding step
    multiplies by (`padded_kernels.step_denses` of each decoder layer), transposed here, once
    per search (for `fixed_shape_step(..., transpose_kernels=True)`)."""
    denses = [
        dense
        for layer in model.decoder.layers
        for dense in tf.nest.flatten(padded_kernels.step_denses(layer))
    ]
    return [(dense.kernel, tf.transpose(dense.kernel.value)) for dense in denses]


def fixed_shape_step(
    model: Transformer,
    memory,
    memory_mask,
    max_decode_length,
    transpose_kernels: bool = False,
    output_kernel=None,
) -> StepFunction:
    """The fixed-shape design: a row per hypothesis, buffers of `max_decode_length` positions.

    Args:
        model: a `Transformer`.
        memory: encoder output `(batch, src_len, d_model)` from `model.encode`.
        memory_mask: boolean `(batch, src_len)`.
        max_decode_length: int (or scalar tensor, static under XLA): the buffers' length.
        transpose_kernels: XLA only: the step's layers read each decoder kernel through its
            transpose, made once before the loop (`transposed_kernels`, through a
            `keras.StatelessScope`), and the output projection multiplies by the embedding
            `(vocab, d_model)` as it is: XLA folds each transpose back into its product,
            which then reads its weights in `(out, in)` order. The same results; without XLA
            every step would copy the kernels.
        output_kernel: `E^T` `(d_model, vocab)` in the compute dtype, made once outside the
            search (`Translator(store_output_kernel=True)`, the XLA export's); default:
            `SharedEmbedding.output_kernel()`, transposed here once per search (under XLA a
            copy of the whole embedding each request). Not with `transpose_kernels`.

    Returns:
        A `StepFunction` for `decode` with `LoopOptions(padded=True)`. Its cache is the
        per-layer list of self-attention `{"key", "value"}` zero buffers `(batch, h,
        max_decode_length, d_k)`, per source: the loop tiles it by beam and reorders its rows.
        `shared` is `{"cross": per-layer {"key", "value"} (batch, h, src_len, d_k), "mask":
        (batch, src_len)}`, per source: the loop tiles it by beam once, never reorders it.
    """
    if transpose_kernels and output_kernel is not None:
        raise ValueError(
            "fixed_shape_step: transpose_kernels=True reads the embedding as it is; pass no "
            f"output_kernel. Received: output_kernel of shape {output_kernel.shape}"
        )
    cache = model.init_cache(memory, max_length=max_decode_length)  # cross: projected once
    kernels = None
    if transpose_kernels:
        kernels = transposed_kernels(model)  # [(variable, (units, in))], once
        # output_kernel None: each step's E^T is folded into its product with E (vocab, d)
    elif output_kernel is None:
        output_kernel = model.token_embedding.output_kernel()  # (d_model, vocab), once

    def fn(ids, step, self_cache, shared):
        # newest token -> (rows, 1); a gather, not ids[:, step:step + 1], whose dynamic
        # bounds XLA cannot size statically
        tokens = tf.gather(ids, tf.reshape(step, [1]), axis=1)
        layer_caches = [{"self": s, "cross": c} for s, c in zip(self_cache, shared["cross"])]
        with _kernels_read_through(kernels):
            logits, new_cache = model.decode(
                tokens, shared["mask"], layer_caches, cache_update_index=step,
                output_kernel=output_kernel,
            )  # fmt: skip  # logits: (rows, 1, vocab)
        return logits[:, 0, :], [layer["self"] for layer in new_cache]

    shared = {"cross": [layer["cross"] for layer in cache], "mask": memory_mask}
    return StepFunction(_graph(fn), [layer["self"] for layer in cache], shared)


def _kernels_read_through(kernels):
    """A scope in which each kernel variable of `kernels` reads as the transpose of its
    transposed copy; no scope for None."""
    if kernels is None:
        return contextlib.nullcontext()
    mapping = [(variable, tf.transpose(transposed)) for variable, transposed in kernels]
    return keras.StatelessScope(state_mapping=mapping)


def per_source_step(
    model: Transformer,
    memory,
    memory_mask,
    beam_size: int,
    recent_positions: int = slot_cache.RECENT_POSITIONS,
    pad_kernels: bool = False,
) -> StepFunction:
    """The production design: growing buffers, every state per source, nothing reordered.

    Args:
        model: a `Transformer`.
        memory: encoder output `(items, src_len, d_model)` from `model.encode`.
        memory_mask: boolean `(items, src_len)`.
        beam_size: rows per item of the strategy (its `rows_per_item`; 1 for `Sampling`).
        recent_positions: the self-attention cache's recent part is merged into the older
            part every this many steps (`slot_cache.merge_recent`).
        pad_kernels: multiply by the decoder's weights copied once per search into padded
            buffers (`padded_kernels`, for searches of `padded_kernels.MIN_ROWS` rows or
            more): the same results, faster products on some CPUs.

    Returns:
        A `StepFunction` for `decode` with growing buffers. Its cache is `{"slots": (items, t,
        beam) int32, "layers": per-layer `slot_cache` keys/values}`: at each step every row
        writes its new key/value at position t in its own beam slot, and `slots[:, s, q]` says
        which slot holds position s of the hypothesis in beam q. `shared` is `{"cross":
        per-layer {"key", "value"} (items, h, src_len, d_k), "mask": (items, src_len)}`.
    """
    layers = model.init_cache(memory)  # cross: projected once
    shared = {"cross": [layer["cross"] for layer in layers], "mask": memory_mask}
    items = tf.shape(memory)[0]
    cache = {
        "slots": tf.zeros([items, 0, beam_size], tf.int32),  # (items, 0, beam)
        "layers": [_empty_slot_cache(items, layer, beam_size) for layer in model.decoder.layers],
    }
    output_kernel = model.token_embedding.output_kernel()  # (d_model, vocab), once
    kernels = padded_kernels.decoder_kernels(model, items * beam_size) if pad_kernels else None
    own = tf.range(beam_size, dtype=tf.int32)[None, None, :]  # (1, 1, beam): row q in slot q

    def fn(ids, step, cache, shared):
        items = tf.shape(cache["slots"])[0]
        slots = tf.concat([cache["slots"], tf.tile(own, [items, 1, 1])], 1)  # (items, t+1, b)
        ancestors = slot_cache.ancestor_mask(slots, beam_size)  # the same for every layer
        logits, new_layers = per_source.decoder_step(
            model, ids[:, -1:], step, cache["layers"], ancestors, shared, output_kernel, kernels
        )  # logits: (items * beam, vocab)
        new_layers = slot_cache.merge_recent(new_layers, recent_positions)
        return logits, {"slots": slots, "layers": new_layers}

    return StepFunction(_graph(fn), cache, shared, slot_cache.reorder_slots)


def _empty_slot_cache(items, layer, beam: int) -> dict:
    """A decoder layer's `slot_cache` before the first step, in its compute dtype."""
    attention = layer.self_attention
    return slot_cache.empty(
        items, attention.num_heads, beam, attention.key_dim, attention.value_dim,
        layer.compute_dtype,
    )  # fmt: skip


def _graph(fn):
    """Eagerly, `fn` as one `tf.function` (one graph call per step instead of eager layer
    calls); inside a traced function, `fn` itself."""
    return graph_function(fn, reduce_retracing=True) if tf.executing_eagerly() else fn
