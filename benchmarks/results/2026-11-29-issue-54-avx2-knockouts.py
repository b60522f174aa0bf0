"""Issue 54, AVX2: what each part of a base beam-search step costs in wall time, and two
candidate changes, by patching the step and timing whole searches side by side.

The workload of `python benchmarks/run.py decode --with-peers` (`benchmarks/peers/ours`:
base, random weights, vocabulary 32000, 32 sources of 32 tokens, beam 4, exactly 32 output
tokens). Each variant is `decode_benchmark.forced_search` traced under a patch; the rounds
alternate the variants, one search each.

    PYTHONPATH=. python benchmarks/results/2026-11-29-issue-54-avx2-knockouts.py OUT.json \
        [ROUNDS] [VARIANTS]

Variants (comma-separated; default all):
- base: the search as it is.
- no_self_attention: `slot_cache.attend` returns zeros: no self-attention products, mask or
  softmax (the projections and cache writes stay). A knock-out: wrong outputs, true cost.
- no_cross_attention: `ScaledDotProductAttention.call` returns zeros (the step's
  encoder-decoder attention, and the encoder's self-attention once a search).
- no_output_projection: the logits are zeros: no `(128, 512) x (512, 32000)` product.
- padded_output_kernel: `E^T` padded once a search to `(512, 32000 + 16)` as the decoder's
  kernels are (`padded_kernels.PAD`), the logits sliced back to 32000.
- fused_qkv: self-attention's Q, K and V by one product with `[W_Q W_K W_V]`, concatenated
  and padded to `(512, 1536 + 16)` once, before the search.

The candidates must give the same ids as `base` (checked and printed).
"""

import json
import sys
import time

from keras_transformer import onednn

onednn.prefer_onednn()  # as the commands do

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

from benchmarks import machine  # noqa: E402
from benchmarks.decode_benchmark import forced_search  # noqa: E402
from benchmarks.peers import ours  # noqa: E402
from benchmarks.peers.spec import Spec, decode_sources  # noqa: E402
from keras_transformer.decoding import padded_kernels, per_source, slot_cache  # noqa: E402
from keras_transformer.layers import scaled_dot_product_attention as sdpa  # noqa: E402
from keras_transformer.layers import shared_embedding  # noqa: E402

Attention = sdpa.ScaledDotProductAttention
Embedding = shared_embedding.SharedEmbedding
ORIGINAL = {
    (slot_cache, "attend"): slot_cache.attend,
    (Attention, "call"): Attention.call,
    (Embedding, "call"): Embedding.call,
    (Embedding, "output_kernel"): Embedding.output_kernel,
    (per_source, "self_attend"): per_source.self_attend,
}


def restore() -> None:
    for (owner, name), value in ORIGINAL.items():
        setattr(owner, name, value)


def zero_self_attention(q, cache, mask):
    """(items, h, beam, d_k) -> zeros (items, h, beam, d_v) (d_v = d_k in every preset)."""
    return tf.zeros_like(q)


def zero_cross_attention(self, query, key, value, attention_mask=None, training=None):
    weights = tf.zeros(tf.concat([tf.shape(query)[:-1], tf.shape(key)[2:3]], 0))
    return tf.zeros_like(query), weights  # (b, h, q, d_v), (b, h, q, k)


def zero_logits(self, inputs, reverse=False, output_kernel=None):
    if not reverse:
        return ORIGINAL[(Embedding, "call")](self, inputs)
    leading = tf.shape(inputs)[:-1]
    return tf.zeros(tf.concat([leading, [self.vocab_size]], 0))  # (rows, 1, vocab)


def padded_output_kernel(self):
    kernel = ORIGINAL[(Embedding, "output_kernel")](self)  # (d_model, vocab)
    return ops.pad(kernel, [[0, 0], [0, padded_kernels.PAD]])  # -> (d_model, vocab + PAD)


def sliced_logits(self, inputs, reverse=False, output_kernel=None):
    if not reverse or output_kernel is None or output_kernel.shape[-1] == self.vocab_size:
        return ORIGINAL[(Embedding, "call")](self, inputs, reverse, output_kernel)
    leading = ops.shape(inputs)[:-1]
    flat = ops.reshape(inputs, (-1, self.d_model))  # -> (rows, d_model)
    logits = ops.matmul(flat, output_kernel)[:, : self.vocab_size]  # -> (rows, vocab)
    return ops.cast(ops.reshape(logits, (*leading, self.vocab_size)), "float32")


def fused_projections(model) -> dict:
    """Per decoder self-attention layer: `[W_Q W_K W_V]` (d, 3 h d_k + PAD) and its bias."""
    fused = {}
    for layer in model.decoder.layers:
        a = layer.self_attention
        denses = (a.query_dense, a.key_dense, a.value_dense)
        kernel = tf.concat([d.kernel for d in denses], 1)  # (d_model, 3 h d_k)
        bias = tf.concat([d.bias for d in denses], 0)
        fused[id(a)] = (
            tf.Variable(tf.pad(kernel, [[0, 0], [0, padded_kernels.PAD]])),
            tf.Variable(tf.pad(bias, [[0, padded_kernels.PAD]])),
        )
    return fused


def fused_self_attend(fused):
    def self_attend(attention, x, cache, ancestors, kernels=None):
        """`per_source.self_attend` with one product for Q, K and V."""
        kernels = kernels or {}
        items, beam = ops.shape(cache["key"])[0], ops.shape(ancestors)[1]
        heads, depth = attention.num_heads, attention.key_dim
        width = heads * depth

        def per_item(y):  # (rows, h * depth) -> (items, h, 1, beam, depth)
            y = ops.reshape(y, (items, beam * heads, depth))
            y = per_source.swap_blocks(y, beam, heads)
            return ops.reshape(y, (items, heads, 1, beam, depth))

        kernel, bias = fused[id(attention)]
        qkv = ops.matmul(ops.reshape(x, (-1, ops.shape(x)[-1])), kernel) + bias  # (rows, 3w+P)
        query, key, value = qkv[:, :width], qkv[:, width : 2 * width], qkv[:, 2 * width : 3 * width]
        cache = slot_cache.append(cache, per_item(key), per_item(value))
        q = per_source.group_queries(attention, query[:, None, :], items)  # (items, h, beam, d)
        out = slot_cache.attend(q, cache, ancestors)
        concat = per_source.ungroup_heads(attention, out, ops.shape(x)[0], 1)
        return per_source.dense(attention.output_dense, concat, kernels.get("output")), cache

    return self_attend


def patches(model) -> dict:
    fused = fused_projections(model)
    return {
        "base": [],
        "no_self_attention": [(slot_cache, "attend", zero_self_attention)],
        "no_cross_attention": [(Attention, "call", zero_cross_attention)],
        "no_output_projection": [(Embedding, "call", zero_logits)],
        "padded_output_kernel": [
            (Embedding, "output_kernel", padded_output_kernel),
            (Embedding, "call", sliced_logits),
        ],
        "fused_qkv": [(per_source, "self_attend", fused_self_attend(fused))],
    }


def main(out: str, rounds: int, names: list[str] | None) -> None:
    spec = Spec()
    model = ours.build_model(spec)
    source = tf.constant(decode_sources(spec))
    table = patches(model)
    names = names or list(table)
    searches, ids = {}, {}
    for name in names:
        restore()
        for owner, attribute, value in table[name]:
            setattr(owner, attribute, value)
        searches[name] = forced_search(model, model.config, spec.beam, spec.out_length)
        ids[name] = searches[name](source).numpy()  # traced under the patch
    restore()
    same = {
        n: bool(np.array_equal(ids[n], ids["base"]))
        for n in names
        if "base" in ids and not n.startswith("no_")
    }
    print("same ids as base:", same)
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names:
            start = time.perf_counter()
            searches[name](source).numpy()
            times[name].append(time.perf_counter() - start)
        print(r, {n: round(t[-1], 3) for n, t in times.items()}, flush=True)
    median = {n: float(np.median(t)) for n, t in times.items()}
    tokens = spec.batch * spec.out_length
    print(f"\n{machine.description()}; TF {tf.__version__}, oneDNN {onednn.onednn_enabled()}")
    print("| variant | median s | output tokens/s | base / variant |\n|---|---:|---:|---:|")
    for n in names:
        ratio = median["base"] / median[n] if "base" in median else float("nan")
        print(f"| {n} | {median[n]:.3f} | {tokens / median[n]:.0f} | {ratio:.3f} |")
    report = {
        "machine": machine.description(),
        "tensorflow": tf.__version__,
        "onednn": onednn.onednn_enabled(),
        "rounds": rounds,
        "seconds": times,
        "median_s": median,
        "same_ids_as_base": same,
    }
    with open(out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(
        sys.argv[1],
        int(sys.argv[2]) if len(sys.argv) > 2 else 7,
        sys.argv[3].split(",") if len(sys.argv) > 3 else None,
    )
