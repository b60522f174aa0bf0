"""Issue 54, a probe (not kept): fewer XLA kernels a decoding step, by reductions XLA's CPU
tree-reduction rewriter leaves whole, and attention without products; each variant traced in
this process only, alternated call by call with the stock search (medians).

    python benchmarks/results/2026-11-28-issue-54-reduction-kernels-probe.py RUN ROUNDS \
        norm,soft,both,mulred

Variants: `norm`, LayerNormalization's mean and variance over the last axis read as
`(d / 32, 32)`; `soft`, attention's softmax as max, exp, sum, divide (no log-sum-exp), the key
axis padded to a multiple of 32 and read the same way; `both`; `mulred`, a one-query step's
`Q K^T` and weights x V as multiply-and-sum instead of batched products. RUN: a
`sample_en_de` run; sentences as 2026-11-27-issue-54-fixed-slot-ab.py picks them.
Results: 2026-11-28-issue-54-reduction-kernels.md.
"""

import importlib
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import SearchOptions, artifacts
from keras_transformer.decoding import Translator
from keras_transformer.layers import scaled_dot_product_attention as sdpa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ab = importlib.import_module("2026-11-27-issue-54-fixed-slot-ab")
MODE = {"norm": False, "soft": False, "mulred": False}
orig_norm = keras.layers.LayerNormalization.call
orig_attn = sdpa.ScaledDotProductAttention.call


def norm_call(self, inputs):
    d = inputs.shape[-1]
    if not MODE["norm"] or d % 32 or d <= 32:
        return orig_norm(self, inputs)
    x = tf.cast(inputs, "float32")
    shape = tf.shape(x)
    xs = tf.reshape(x, tf.concat([shape[:-1], [d // 32, 32]], 0))
    mean = tf.reduce_mean(xs, axis=[-2, -1], keepdims=True)
    c = xs - mean
    var = tf.reduce_mean(tf.square(c), axis=[-2, -1], keepdims=True)
    y = tf.reshape(c * tf.math.rsqrt(var + self.epsilon), shape)
    return tf.cast(y * self.gamma + self.beta, self.compute_dtype)


def attn_call(self, query, key, value, attention_mask=None, training=None):
    if not MODE["soft"]:
        return orig_attn(self, query, key, value, attention_mask, training)
    scale = 1.0 / np.sqrt(query.shape[-1])
    scores = tf.cast(tf.einsum("bhqd,bhkd->bhqk", query, key), "float32") * scale
    if attention_mask is not None:
        scores = tf.where(tf.cast(attention_mask, "bool"), scores, sdpa.MASK_VALUE)
    k = scores.shape[-1]
    if k is not None and k > 32:
        pad = -k % 32
        s = tf.pad(scores, [[0, 0]] * 3 + [[0, pad]], constant_values=sdpa.MASK_VALUE)
        sh = tf.shape(s)
        s = tf.reshape(s, tf.concat([sh[:-1], [(k + pad) // 32, 32]], 0))
        m = tf.reduce_max(s, axis=[-2, -1], keepdims=True)
        e = tf.exp(s - m)
        w = e / tf.reduce_sum(e, axis=[-2, -1], keepdims=True)
        weights = tf.reshape(w, sh)[..., :k]
    else:
        m = tf.reduce_max(scores, axis=-1, keepdims=True)
        e = tf.exp(scores - m)
        weights = e / tf.reduce_sum(e, axis=-1, keepdims=True)
    out = tf.einsum("bhqk,bhkd->bhqd", tf.cast(weights, self.compute_dtype), value)
    return out, weights


def mulred_call(self, query, key, value, attention_mask=None, training=None):
    if not MODE["mulred"] or query.shape[2] != 1:
        return orig_attn(self, query, key, value, attention_mask, training)
    scale = 1.0 / np.sqrt(query.shape[-1])
    # (b,h,1,d) * (b,h,k,d) -> sum over d -> (b,h,1,k)
    scores = tf.reduce_sum(query * key, axis=-1)[:, :, None, :] * scale
    scores = tf.cast(scores, "float32")
    if attention_mask is not None:
        scores = tf.where(tf.cast(attention_mask, "bool"), scores, sdpa.MASK_VALUE)
    weights = tf.exp(scores - tf.reduce_logsumexp(scores, axis=-1, keepdims=True))
    # (b,h,1,k) -> (b,h,k,1) * (b,h,k,d) -> sum over k -> (b,h,1,d)
    out = tf.reduce_sum(tf.transpose(weights, [0, 1, 3, 2]) * value, axis=2, keepdims=True)
    return out, weights


keras.layers.LayerNormalization.call = norm_call
sdpa.ScaledDotProductAttention.call = lambda self, *a, **k: (
    mulred_call if MODE["mulred"] else attn_call
)(self, *a, **k)


def main():
    run, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
    model, _, tok = artifacts.load_trained(run)
    opts = SearchOptions(
        alpha=artifacts.run_eval_alpha(run), stop_lookahead="next", padded_decode=True
    )
    srcs = ab.sources(tok, model.config.max_length, trained=True)
    searches = {}
    for v in ["stock"] + variants:
        MODE["norm"] = v in ("norm", "both")
        MODE["soft"] = v in ("soft", "both")
        MODE["mulred"] = v == "mulred"
        s = Translator(model, tok, opts, jit_compile=True).search_function(1)
        for b in srcs.values():
            s(b[0])
        searches[v] = s
    MODE["norm"] = MODE["soft"] = MODE["mulred"] = False
    for pieces, batch in srcs.items():
        for v in variants:
            same, d = 0, 0.0
            for src in batch:
                (a, sa), (b, sb) = searches["stock"](src), searches[v](src)
                same += int(np.array_equal(a.numpy(), b.numpy()))
                d = max(d, float(np.abs(np.asarray(sa) - np.asarray(sb)).max()))
            print(f"{pieces} {v}: same {same}/{len(batch)} score diff {d:.1e}")
        t = {v: [] for v in searches}
        for _ in range(rounds):
            for src in batch:
                for v, s in searches.items():
                    st = time.perf_counter()
                    s(src)[0].numpy()
                    t[v].append(time.perf_counter() - st)
        ms = {v: 1e3 * np.median(x) for v, x in t.items()}
        print(
            pieces,
            " ".join(f"{v} {m:.2f}ms ({ms['stock'] / m:.3f})" for v, m in ms.items()),
            flush=True,
        )


if __name__ == "__main__":
    main()
