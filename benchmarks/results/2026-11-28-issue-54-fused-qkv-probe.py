"""Issue 54, a probe (not kept): the XLA search's self-attention Q, K and V as one product by
a kernel concatenated once per search, before the loop, against the three products of
`MultiHeadAttention`, alternated in one process (medians), the same ids and scores checked
first.

    python benchmarks/results/2026-11-28-issue-54-fused-qkv-probe.py RUN ROUNDS

RUN: a `sample_en_de` run (its test sentences of 5, 20 and 50 pieces, picked as
2026-11-27-issue-54-fixed-slot-ab.py picks them). The probe patches `MultiHeadAttention.call`
and `search.fixed_shape_step` in this process only. Results:
2026-11-28-issue-54-fused-qkv-probe.md.
"""

import importlib
import os
import sys
import time

import numpy as np
import tensorflow as tf
from keras import ops

from keras_transformer import SearchOptions, artifacts
from keras_transformer.decoding import Translator, incremental
from keras_transformer.decoding import search as search_module
from keras_transformer.layers import MultiHeadAttention

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ab = importlib.import_module("2026-11-27-issue-54-fixed-slot-ab")

FUSE = {"on": False}  # read when a search is traced
original_call = MultiHeadAttention.call
original_step = incremental.fixed_shape_step


def fused_step(model, memory, memory_mask, max_len, transpose_kernels=False):
    """`fixed_shape_step`, with each decoder self-attention's [W_Q W_K W_V] and biases
    concatenated once, before the loop, when fusing."""
    if FUSE["on"]:
        for layer in model.decoder.layers:
            a = layer.self_attention
            denses = (a.query_dense, a.key_dense, a.value_dense)
            a._probe_kernel = tf.concat([d.kernel.value for d in denses], axis=1)  # (d, 3 h d_k)
            a._probe_bias = tf.concat([d.bias.value for d in denses], axis=0)  # (3 h d_k,)
    return original_step(model, memory, memory_mask, max_len, transpose_kernels)


def fused_call(self, query, value=None, key=None, attention_mask=None, cache=None,
               cache_update_index=None, training=None, return_attention_scores=False):  # fmt: skip
    """`MultiHeadAttention.call`; a fixed-buffer self-attention step multiplies once."""
    kernel = getattr(self, "_probe_kernel", None)
    step = value is query and cache is not None and cache_update_index is not None
    if not (FUSE["on"] and kernel is not None and step):
        return original_call(self, query, value, key, attention_mask, cache, cache_update_index,
                             training, return_attention_scores)  # fmt: skip
    n = self.num_heads * self.key_dim
    qkv = ops.matmul(query, kernel) + self._probe_bias  # (rows, 1, 3 n)
    q = self.split_heads(qkv[..., :n], self.key_dim)
    new = {"key": self.split_heads(qkv[..., n : 2 * n], self.key_dim),
           "value": self.split_heads(qkv[..., 2 * n :], self.value_dim)}  # fmt: skip
    kv = self._append_to_cache(cache, new, cache_update_index)
    mask = None
    if attention_mask is not None:
        mask = ops.expand_dims(ops.cast(attention_mask, "bool"), axis=1)
    heads, _ = self.attention(q, kv["key"], kv["value"], attention_mask=mask, training=training)
    return self._output_dense(self.merge_heads(heads)), kv


def timed(search, source) -> float:
    start = time.perf_counter()
    search(source)[0].numpy()
    return time.perf_counter() - start


def main() -> None:
    run, rounds = sys.argv[1], int(sys.argv[2])
    MultiHeadAttention.call = fused_call
    search_module.fixed_shape_step = fused_step
    model, _, tokenizer = artifacts.load_trained(run)
    options = SearchOptions(
        alpha=artifacts.run_eval_alpha(run), stop_lookahead="next", padded_decode=True
    )
    sources = ab.sources(tokenizer, model.config.max_length, trained=True)
    FUSE["on"] = True
    fused = Translator(model, tokenizer, options, jit_compile=True).search_function(1)
    for batch in sources.values():
        fused(batch[0])  # traced (one width per length) while fusing
    FUSE["on"] = False
    three = Translator(model, tokenizer, options, jit_compile=True).search_function(1)
    for pieces, batch in sources.items():
        same, differ = 0, 0.0
        for source in batch:
            (a, score_a), (b, score_b) = fused(source), three(source)
            same += int(np.array_equal(a.numpy(), b.numpy()))
            differ = max(differ, float(np.abs(score_a - score_b).max()))
        times = {"fused": [], "three": []}
        for _ in range(rounds):
            for source in batch:
                for name, search in (("fused", fused), ("three", three)):
                    times[name].append(timed(search, source))
        ms = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
        print(f"{pieces} pieces: same ids {same} of {len(batch)}, scores within {differ:.1e}; "
              f"fused {ms['fused']:.2f} ms, three {ms['three']:.2f} ms, three / fused "
              f"{ms['three'] / ms['fused']:.3f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
