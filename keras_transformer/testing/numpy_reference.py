"""NumPy versions of the paper's formulas, computed from a layer's own weights: the independent
references the layer tests compare our Keras layers with (dropout 0).

    want = np_encoder_layer(layer, x, mask)   # x: (batch, src_len, d_model), mask: (batch, src_len)
"""

from __future__ import annotations

import math

import numpy as np

from keras_transformer.testing.layer_inputs import to_np


def np_softmax(x):
    """Softmax over the last axis."""
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def np_attention(q, k, v, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V for (..., len, d) arrays; mask True = may attend."""
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = np_softmax(scores)
    return weights @ v, weights


def np_dense(dense, x):
    """x W + b with the kernel (and bias) of the Keras `Dense` layer `dense`."""
    kernel = to_np(dense.kernel)
    return x @ kernel + (to_np(dense.bias) if dense.use_bias else 0.0)


def np_mha(layer, query, value, mask=None):
    """Concat(head_1..head_h) W_O with head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i).

    `mask` is `(batch, q_len, k_len)` or broadcastable; True = may attend.
    """
    dk, dv = layer.key_dim, layer.value_dim
    q_all = np_dense(layer.query_dense, query)  # (batch, q_len, h * d_k)
    k_all = np_dense(layer.key_dense, value)
    v_all = np_dense(layer.value_dense, value)
    heads = []
    for i in range(layer.num_heads):
        head, _ = np_attention(
            q_all[..., i * dk : (i + 1) * dk],
            k_all[..., i * dk : (i + 1) * dk],
            v_all[..., i * dv : (i + 1) * dv],
            mask,
        )
        heads.append(head)  # (batch, q_len, d_v)
    return np_dense(layer.output_dense, np.concatenate(heads, axis=-1))


def np_ffn(layer, x):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 with the weights of a `PositionwiseFeedForward`."""
    return np_dense(layer.outer, np.maximum(0.0, np_dense(layer.inner, x)))


def np_layer_norm(norm, x):
    """Layer normalization over the last axis with the gamma, beta and epsilon of `norm`."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + norm.epsilon) * to_np(norm.gamma) + to_np(norm.beta)


def np_residual(layer, x, sublayer, norm):
    """LayerNorm(x + Sublayer(x)) (post) or x + Sublayer(LayerNorm(x)) (pre); dropout 0."""
    if layer.norm_position == "post":
        return np_layer_norm(norm, x + sublayer(x))
    return x + sublayer(np_layer_norm(norm, x))


def np_encoder_layer(layer, x, mask=None):
    """An `EncoderLayer`: self-attention, then the feed-forward network, each wrapped by
    `np_residual`; `mask` is the `(batch, src_len)` padding mask (True = a token)."""
    key_mask = None if mask is None else mask[:, None, :]  # (batch, 1, src_len)
    x = np_residual(
        layer, x, lambda h: np_mha(layer.self_attention, h, h, key_mask), layer.attention_norm
    )
    return np_residual(layer, x, lambda h: np_ffn(layer.feed_forward, h), layer.feed_forward_norm)


def np_decoder_layer(layer, x, memory, self_mask, memory_mask):
    """A `DecoderLayer`: masked self-attention (`self_mask` broadcastable to
    `(batch, tgt_len, tgt_len)`), attention over `memory` (`memory_mask`: `(batch, src_len)`),
    then the feed-forward network, each wrapped by `np_residual`."""
    cross_mask = memory_mask[:, None, :]  # (batch, 1, src_len)
    x = np_residual(
        layer, x, lambda h: np_mha(layer.self_attention, h, h, self_mask), layer.attention_norm
    )
    x = np_residual(
        layer,
        x,
        lambda h: np_mha(layer.cross_attention, h, memory, cross_mask),
        layer.cross_attention_norm,
    )
    return np_residual(layer, x, lambda h: np_ffn(layer.feed_forward, h), layer.feed_forward_norm)


def np_sinusoids(length, d_model, start=0):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    table = np.zeros((length, d_model))
    for pos in range(start, start + length):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            table[pos - start, 2 * i] = math.sin(angle)
            table[pos - start, 2 * i + 1] = math.cos(angle)
    return table
