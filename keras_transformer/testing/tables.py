"""Hand-written next-token tables for search tests: random logits that depend on the item, the
step, the last token and the sum of the tokens so far (so a misordered cache changes them),
with a NumPy enumeration of every hypothesis for exhaustive references."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

BOS = 0
PAD = -1  # token 0 is a real token of the tables


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


class Table:
    """Random logits `(batch, vocab, max_len, vocab)` by last token and step, plus a term by
    the prefix's sum modulo 3; the step function keeps the history in its cache."""

    def __init__(self, seed, batch, vocab, max_len):
        rng = np.random.default_rng(seed)
        self.vocab, self.max_len = vocab, max_len
        self.by_last = 2.0 * rng.standard_normal((batch, vocab, max_len, vocab)).astype("f4")
        self.by_sum = 2.0 * rng.standard_normal((batch, 3, vocab)).astype("f4")

    def log_probs(self, item, prefix):
        """NumPy reference: log P(. | prefix), prefix starting with BOS."""
        step = len(prefix) - 1
        logits = self.by_last[item, prefix[-1], step] + self.by_sum[item, sum(prefix) % 3]
        return log_softmax(logits.astype("f8"))

    def initial_cache(self, batch, padded=False):
        """The cache: the history of tokens `(batch, len, 1)` (empty and growing, or
        `max_len` long with `padded`) and each row's item `(batch,)`."""
        length = self.max_len if padded else 0
        return {"history": tf.zeros([batch, length, 1], tf.int32), "item": tf.range(batch)}

    def fn(self, padded=False):
        """`(ids, step, cache, shared) -> (logits, cache)`, a row per hypothesis; `padded`:
        `ids` and the history are `max_len` wide and written at `step`."""
        by_last, by_sum = tf.constant(self.by_last), tf.constant(self.by_sum)

        def symbols_to_logits_fn(ids, step, cache, shared):
            token = tf.gather(ids, tf.reshape(step, [1]), axis=1)  # (rows, 1)
            token = tf.maximum(token, 0)  # finished rows of `sample` feed PAD = -1
            history = cache["history"]
            if padded:
                at = tf.equal(tf.range(self.max_len), step)[None, :, None]
                history = tf.where(at, token[:, :, None], history)
            else:
                history = tf.concat([history, token[:, :, None]], axis=1)
            total = tf.reduce_sum(history[:, :, 0], axis=1)  # with BOS
            item = cache["item"]
            steps = tf.fill(tf.shape(item), step)
            logits = tf.gather_nd(by_last, tf.stack([item, token[:, 0], steps], -1))
            logits += tf.gather_nd(by_sum, tf.stack([item, total % 3], -1))
            return logits, {"history": history, "item": item}

        return symbols_to_logits_fn

    def hypotheses(self, item, limit, alpha, eos):
        """Every hypothesis (ending in EOS, or cut at `limit`): [(score, tokens)], unsorted."""
        results = []

        def extend(prefix, log_prob):
            log_probs = self.log_probs(item, prefix)
            length = len(prefix)
            for token in range(self.vocab):
                total = log_prob + log_probs[token]
                if token == eos or length == limit:
                    results.append((total / ((5.0 + length) / 6.0) ** alpha, prefix[1:] + [token]))
                else:
                    extend(prefix + [token], total)

        extend([BOS], 0.0)
        return results


def strip(row, eos):
    """Generated tokens of a returned row: BOS dropped, up to and with EOS, no padding."""
    tokens = [int(t) for t in row[1:]]
    tokens = tokens[: tokens.index(eos) + 1] if eos in tokens else tokens
    while tokens and tokens[-1] == PAD:  # cut at the length limit
        tokens.pop()
    assert all(t != PAD for t in tokens) and all(t == PAD for t in row[len(tokens) + 1 :])
    return tokens
