"""Cross-entropy with label smoothing that ignores padding (paper, section 5.4), and the
token-level metrics: masked accuracy, perplexity and a token counter."""

from __future__ import annotations

import keras
from keras import ops


def _labels_logits_and_mask(y_true, y_pred, pad_id):
    labels = ops.cast(y_true, "int32")  # (batch, tgt_len)
    logits = ops.cast(y_pred, "float32")  # (batch, tgt_len, vocab)
    mask = ops.cast(ops.not_equal(labels, pad_id), "float32")  # (batch, tgt_len)
    return labels, logits, mask


def _label_logit(labels, logits):
    picked = ops.take_along_axis(logits, ops.expand_dims(labels, -1), axis=-1)
    return ops.squeeze(picked, -1)  # (batch, tgt_len): z_y


def _token_nll(labels, logits):
    """-log p_y = logsumexp(z) - z_y, without the (batch, len, vocab) log-softmax."""
    return ops.logsumexp(logits, axis=-1) - _label_logit(labels, logits)  # (batch, tgt_len)


def _smoothed_cross_entropy(labels, logits, eps, one_hot_gradient=False):
    """Per token `lse(z) - (1 - eps) z_y - eps mean_v(z_v)`, `(batch, tgt_len)`, with its
    gradient written out: `d/dz_v = softmax(z)_v - (1 - eps) [v == y] - eps / vocab`.

    Left to autodiff, the gradient of the label's logit (a gather) becomes a scatter into a
    dense `(batch, tgt_len, vocab)` zero tensor (TensorFlow's UnsortedSegmentSum), and the
    three terms' gradients are summed in further passes over that tensor. Here the backward
    pass reuses the forward's `exp(z - max)`, makes two passes, and writes the label term into
    the `batch * tgt_len` label positions (a scatter, in place). The loss, its gradient and
    the fit step before and after: benchmarks/results/2026-11-25-benchmarks-history.md, "The
    loss's gradient written out" (`python benchmarks/profile_train_step.py --config base
    --vocab-size 32000 --batch 32 --length 32 --repeats 3 [--dtype mixed_bfloat16]`).

    With `one_hot_gradient` the label term is subtracted as `one_hot(y) * (1 - eps) g`
    instead: no scatter, which TensorFlow runs on the host under op determinism (a round
    trip of the step's largest tensor on a GPU), for three more passes over the dense
    tensor. Both give the same values and gradients, bit for bit. On a 2-core CPU the
    one-hot form took more CPU time and no less memory (the same history file, "The loss's
    gradient written out"), so only `--deterministic` uses it.
    """
    vocab = ops.shape(logits)[-1]

    @ops.custom_gradient
    def smoothed(z):
        top = ops.max(z, axis=-1, keepdims=True)  # (batch, tgt_len, 1)
        exp = ops.exp(z - top)  # (batch, tgt_len, vocab)
        total = ops.sum(exp, axis=-1)  # (batch, tgt_len)
        lse = ops.squeeze(top, -1) + ops.log(total)
        loss = lse - (1.0 - eps) * _label_logit(labels, z) - eps * ops.mean(z, axis=-1)

        def grad(*args, upstream=None):
            if upstream is None:  # TensorFlow passes it positionally, JAX by keyword
                (upstream,) = args
            uniform = ops.cast(eps / vocab, upstream.dtype) * upstream  # (batch, tgt_len)
            dense = exp * ops.expand_dims(upstream / total, -1) - ops.expand_dims(uniform, -1)
            label_term = (1.0 - eps) * upstream  # (batch, tgt_len)
            if one_hot_gradient:
                one_hot = ops.one_hot(labels, vocab, dtype=dense.dtype)  # (batch, len, vocab)
                return dense - one_hot * ops.expand_dims(label_term, -1)
            at_label = _label_logit(labels, dense) - label_term  # (batch, tgt_len)
            return _put_at_labels(dense, labels, at_label)

        return loss, grad

    return smoothed(logits)


def _put_at_labels(dense, labels, values):
    """`dense` `(batch, tgt_len, vocab)` with `dense[b, t, labels[b, t]] = values[b, t]`."""
    batch, length = ops.shape(labels)[0], ops.shape(labels)[1]
    rows = ops.broadcast_to(ops.expand_dims(ops.arange(batch, dtype="int32"), 1), (batch, length))
    cols = ops.broadcast_to(ops.expand_dims(ops.arange(length, dtype="int32"), 0), (batch, length))
    where = ops.reshape(ops.stack([rows, cols, labels], axis=-1), (-1, 3))  # -> (b * len, 3)
    return ops.scatter_update(dense, where, ops.reshape(values, (-1,)))


def global_token_count(count):
    """`(count summed over the replicas in sync, number of replicas)`: the count itself and 1
    outside a `tf.distribute` replica context with several replicas (one device, the JAX
    backend, cross-replica code)."""
    if keras.backend.backend() != "tensorflow":
        return count, 1.0
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return count, 1.0
    return context.all_reduce("SUM", count), float(context.num_replicas_in_sync)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedLabelSmoothedCrossEntropy(keras.losses.Loss):
    """Mean over non-padding tokens of the cross-entropy with a smoothed target.

    The target distribution is q = (1 - eps) * one_hot(y) + eps / vocab_size (Keras'
    `label_smoothing` convention), so per token:

        loss = (1 - eps) * (-log p_y) + eps * mean_v(-log p_v)

    With z the logits and lse = logsumexp(z) this is lse - (1 - eps) z_y - eps mean_v(z_v): it
    builds neither the (batch, len, vocab) one-hot tensor nor the log-softmax, only reductions
    over the vocabulary (the log-softmax is a pass over the largest tensor of the step).
    Positions whose label is `pad_id` contribute nothing; the result is the mean over the real
    tokens of the whole global batch, sum(loss * mask) / sum(mask).

    Under a `tf.distribute` strategy with R replicas each replica sees its slice of the global
    batch, and Keras divides each replica's loss by R before summing the replicas' gradients:
    a per-replica token mean would then weight every replica alike, however many real tokens
    (padding is uneven) it holds, and R replicas would not update as one device does with the
    R-times batch. So each replica divides its token sum by the global count (one all-reduce
    of a scalar per step) and multiplies by R, and the summed gradients are exactly those of
    the global token mean (`global_token_count`).

    Args:
        label_smoothing: eps (paper: 0.1).
        pad_id: label id to ignore.
        one_hot_gradient: write the gradient's label term without a scatter (for TensorFlow's
            op determinism, `--deterministic`, which runs scatters on the host); the same
            values and gradients, slower on a CPU (`_smoothed_cross_entropy`).
    """

    def __init__(
        self,
        label_smoothing: float = 0.1,
        pad_id: int = 0,
        one_hot_gradient: bool = False,
        name="smoothed_xent",
        **kw,
    ):
        super().__init__(name=name, **kw)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1). Received: {label_smoothing}")
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id
        self.one_hot_gradient = one_hot_gradient

    def call(self, y_true, y_pred):
        labels, logits, mask = _labels_logits_and_mask(y_true, y_pred, self.pad_id)
        eps, one_hot = self.label_smoothing, self.one_hot_gradient
        loss = _smoothed_cross_entropy(labels, logits, eps, one_hot)  # (batch, tgt_len)
        # Keras' "sum_over_batch_size" divides by batch * len (this replica's), then by the
        # replicas R: weighting real tokens by (batch * len) * R / n_real(global batch) makes
        # that this replica's share of the global mean over real tokens.
        total = ops.cast(ops.size(mask), "float32")
        count, replicas = global_token_count(ops.sum(mask))
        weight = mask * ops.divide_no_nan(total * replicas, count)
        return loss * weight  # (batch, tgt_len)

    def get_config(self):
        config = super().get_config()
        config.update(
            label_smoothing=self.label_smoothing,
            pad_id=self.pad_id,
            one_hot_gradient=self.one_hot_gradient,
        )
        return config


class _MaskedTokenMetric(keras.metrics.Metric):
    """Accumulates a per-token quantity and the number of non-padding tokens."""

    def __init__(self, pad_id: int = 0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def per_token(self, labels, logits):
        raise NotImplementedError

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels, logits, mask = _labels_logits_and_mask(y_true, y_pred, self.pad_id)
        self.total.assign_add(ops.sum(self.per_token(labels, logits) * mask))
        self.count.assign_add(ops.sum(mask))

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(_MaskedTokenMetric):
    """Share of non-padding target tokens whose argmax prediction is right.

    A token is right when its label's logit is the largest, `z_y >= max_v z_v` (argmax z =
    argmax p; a tie, which random float logits do not produce, counts as right). Two
    reductions over the vocabulary instead of `ops.argmax`, whose TensorFlow version guards
    against flushed negative zeros with five more passes over the (batch, len, vocab) logits:
    about 3% of the quick preset's training step on a 2-core CPU (benchmarks/README, "Start-up
    and the accuracy metric").
    """

    def __init__(self, pad_id: int = 0, name="accuracy", **kwargs):
        super().__init__(pad_id=pad_id, name=name, **kwargs)

    def per_token(self, labels, logits):
        best = ops.max(logits, axis=-1)  # (batch, tgt_len)
        return ops.cast(ops.greater_equal(_label_logit(labels, logits), best), "float32")

    def result(self):
        return ops.divide_no_nan(self.total, self.count)


@keras.saving.register_keras_serializable(package="keras_transformer")
class Perplexity(_MaskedTokenMetric):
    """exp(mean negative log-likelihood) over non-padding tokens (no label smoothing)."""

    def __init__(self, pad_id: int = 0, name="perplexity", **kwargs):
        super().__init__(pad_id=pad_id, name=name, **kwargs)

    def per_token(self, labels, logits):
        return _token_nll(labels, logits)

    def result(self):
        return ops.exp(ops.divide_no_nan(self.total, self.count))


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenCount(_MaskedTokenMetric):
    """Number of non-padding target tokens seen since the last reset (for tokens/s)."""

    def __init__(self, pad_id: int = 0, name="tokens", **kwargs):
        super().__init__(pad_id=pad_id, name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.count.assign_add(ops.sum(ops.cast(ops.not_equal(y_true, self.pad_id), "float32")))

    def result(self):
        return self.count
