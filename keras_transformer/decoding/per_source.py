"""One decoder step of a beam search whose state is kept per source, computed from the
`Transformer`'s own layers and weights (`incremental.per_source_step` is its step function).

The beams of a source are consecutive rows, `rows = items * beam`, and nothing per source is
tiled by beam:

- encoder-decoder attention: the source's keys/values `(items, h, src_len, d_k)` are read by
  all its beams in one product per head (`cross_attend`: the queries are grouped by source);
- self-attention: the keys/values live in a `slot_cache`, written once and never reordered;
  each beam attends to its own hypothesis' positions through the ancestor mask
  (`self_attend`).

The arithmetic is the layers' (`layers.DecoderLayer`, `layers.MultiHeadAttention`), only laid
out per source: the sub-layers (`query_dense`, `output_dense`, the layer norms, the
feed-forward block) are called as they are. Inference only (no dropout).
"""

from __future__ import annotations

from keras import ops

from keras_transformer.decoding import slot_cache
from keras_transformer.decoding.padded_kernels import dense
from keras_transformer.layers import DecoderLayer, MultiHeadAttention
from keras_transformer.model import Transformer


def swap_blocks(x, outer, inner):
    """`(n, outer * inner, d)` in (outer, inner) order -> the same in (inner, outer) order.

    A gather over the middle axis (design "slots" of `benchmarks/run.py decode ab`); the
    same swap by `transpose(reshape(x, (n, outer, inner, d)), (0, 2, 1, 3))` ("slots:transpose")
    gave the same ids at the same speed within run-to-run noise:
    benchmarks/results/2026-11-25-decode-slot-cache.md, which has the command."""
    target = ops.arange(outer * inner)
    source = (target % outer) * inner + target // outer  # (outer, inner) index of each
    return ops.take(x, source, axis=1)


def group_queries(attention: MultiHeadAttention, query, items):
    """Projected queries `(rows, q_len, h * d_k)`, rows = items * g (g consecutive rows per
    item) -> `(items, h, g * q_len, d_k)`: one matrix per item and head."""
    rows, q_len = ops.shape(query)[0], ops.shape(query)[1]
    heads, depth = attention.num_heads, attention.key_dim
    per_head = (rows // items) * q_len  # g * q_len queries per item and head
    q = ops.reshape(query, (items, per_head * heads, depth))  # (g * q_len, h) order
    q = swap_blocks(q, per_head, heads)  # -> (items, h * g * q_len, d_k)
    return ops.reshape(q, (items, heads, per_head, depth))


def ungroup_heads(attention: MultiHeadAttention, heads, rows, q_len):
    """`(items, h, g * q_len, d_v)` -> `(rows, q_len, h * d_v)`, the inverse of `group_queries`
    (with the heads concatenated, as `MultiHeadAttention.merge_heads`)."""
    items, per_head = ops.shape(heads)[0], ops.shape(heads)[2]  # g * q_len
    num_heads, depth = attention.num_heads, attention.value_dim
    heads = ops.reshape(heads, (items, num_heads * per_head, depth))
    heads = swap_blocks(heads, num_heads, per_head)  # -> (items, g * q_len * h, d_v)
    return ops.reshape(heads, (rows, q_len, num_heads * depth))


def cross_attend(attention: MultiHeadAttention, query, kv: dict, memory_mask, kernels=None):
    """Encoder-decoder attention of `query (rows, q_len, d_model)` on per-source keys/values
    `{"key": (items, h, src_len, d_k), "value": ...}` (`project_key_value` of the memory),
    with bool `memory_mask (items, src_len)`: `(rows, q_len, d_model)`. `kernels`: None, or
    `{"query", "output"}` from `padded_kernels.layer_kernels`."""
    kernels = kernels or {}
    rows, q_len = ops.shape(query)[0], ops.shape(query)[1]
    items = ops.shape(kv["key"])[0]
    mask = ops.expand_dims(ops.expand_dims(ops.cast(memory_mask, "bool"), 1), 1)  # (i, 1, 1, S)
    heads, _ = attention.attention(
        group_queries(attention, dense(attention.query_dense, query, kernels.get("query")), items),
        kv["key"],
        kv["value"],
        attention_mask=mask,
        training=False,
    )  # heads: (items, h, g * q_len, d_v)
    concat = ungroup_heads(attention, heads, rows, q_len)  # (rows, q_len, h * d_v)
    return dense(attention.output_dense, concat, kernels.get("output"))


def self_attend(attention: MultiHeadAttention, x, cache: dict, ancestors, kernels=None):
    """Self-attention of one new token per row `x (items * beam, 1, d_model)` on a layer's
    `slot_cache`, bool `ancestors (items, beam, (t + 1) * beam)`: `(output (rows, 1, d_model),
    the cache with the new keys/values at position t)`. `kernels`: None, or `{"query", "key",
    "value", "output"}` from `padded_kernels.layer_kernels`."""
    kernels = kernels or {}
    items, beam = ops.shape(cache["key"])[0], ops.shape(ancestors)[1]
    heads = attention.num_heads

    def per_item(x, depth):  # (items * beam, 1, h * depth) -> (items, h, 1, beam, depth)
        x = ops.reshape(x, (items, beam * heads, depth))  # (beam, h) order
        x = swap_blocks(x, beam, heads)  # -> (h, beam) order
        return ops.reshape(x, (items, heads, 1, beam, depth))

    new_key = per_item(dense(attention.key_dense, x, kernels.get("key")), attention.key_dim)
    new_value = per_item(dense(attention.value_dense, x, kernels.get("value")), attention.value_dim)
    cache = slot_cache.append(cache, new_key, new_value)
    query = dense(attention.query_dense, x, kernels.get("query"))  # (rows, 1, h * d_k)
    q = group_queries(attention, query, items)  # (items, h, beam, d_k)
    out = slot_cache.attend(q, cache, ancestors)  # (items, h, beam, d_v)
    concat = ungroup_heads(attention, out, ops.shape(x)[0], 1)  # (rows, 1, h * d_v)
    return dense(attention.output_dense, concat, kernels.get("output")), cache


def layer_step(layer: DecoderLayer, x, cache: dict, ancestors, cross: dict, memory_mask,
               kernels=None):  # fmt: skip
    """`DecoderLayer.call` (inference) for one new token per row `x (rows, 1, d_model)`, with
    the layer's `slot_cache` and per-source cross keys/values: `(output, new cache)`.
    `kernels`: None, or the layer's `padded_kernels.layer_kernels`."""
    kernels = kernels or {}
    feed_forward = kernels.get("feed_forward") or {}

    def attend_self(h):
        return self_attend(layer.self_attention, h, cache, ancestors, kernels.get("self_attention"))

    def attend_memory(h):
        attention, padded = layer.cross_attention, kernels.get("cross_attention")
        return (cross_attend(attention, h, cross, memory_mask, padded),)

    def feed(h):  # FFN(h) = max(0, h W1 + b1) W2 + b2, no dropout in inference
        inner = dense(layer.feed_forward.inner, h, feed_forward.get("inner"))  # (rows, 1, d_ff)
        return (dense(layer.feed_forward.outer, inner, feed_forward.get("outer")),)

    x, (cache,) = layer.residual(x, attend_self, layer.attention_norm, False)
    x, _ = layer.residual(x, attend_memory, layer.cross_attention_norm, False)
    x, _ = layer.residual(x, feed, layer.feed_forward_norm, False)
    return x, cache


def decoder_step(model: Transformer, tokens, step, caches: list, ancestors, shared: dict,
                 output_kernel=None, kernels=None):  # fmt: skip
    """`Transformer.decode` for the newest tokens `(rows, 1)` at position `step`, with per-layer
    `slot_cache`s and `shared = {"cross": per-layer {"key", "value"}, "mask": (items,
    src_len)}`: `(logits (rows, vocab) float32, new per-layer caches)`. `kernels`: None, or
    per layer `padded_kernels.layer_kernels` (`padded_kernels.decoder_kernels`)."""
    decoder = model.decoder
    embedded = model.token_embedding(tokens)  # (rows, 1, d_model)
    x = decoder.embed_positions(embedded, start_index=step, training=False)
    new_caches = []
    kernels = kernels or [None] * len(decoder.layers)
    for layer, cache, cross, padded in zip(decoder.layers, caches, shared["cross"], kernels):
        x, cache = layer_step(layer, x, cache, ancestors, cross, shared["mask"], padded)
        new_caches.append(cache)
    hidden = decoder.apply_final_norm(x)  # (rows, 1, d_model)
    logits = model.token_embedding(hidden, reverse=True, output_kernel=output_kernel)
    return logits[:, 0, :], new_caches  # (rows, vocab)
