"""Cross-entropy with label smoothing that ignores padding (paper, section 5.4), and the
token-level metrics: masked accuracy, perplexity and a token counter."""

from __future__ import annotations

import keras
from keras import ops


def _log_probs_and_mask(y_true, y_pred, pad_id):
    labels = ops.cast(y_true, "int32")  # (batch, tgt_len)
    log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)  # (b, len, vocab)
    mask = ops.cast(ops.not_equal(labels, pad_id), "float32")  # (batch, tgt_len)
    return labels, log_probs, mask


def _token_nll(labels, log_probs):
    picked = ops.take_along_axis(log_probs, ops.expand_dims(labels, -1), axis=-1)
    return -ops.squeeze(picked, -1)  # (batch, tgt_len)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedLabelSmoothedCrossEntropy(keras.losses.Loss):
    """Mean over non-padding tokens of the cross-entropy with a smoothed target.

    The target distribution is q = (1 - eps) * one_hot(y) + eps / vocab_size (Keras'
    `label_smoothing` convention), so per token:

        loss = (1 - eps) * (-log p_y) + eps * mean_v(-log p_v)

    It never builds the (batch, len, vocab) one-hot tensor. Positions whose label is `pad_id`
    contribute nothing; the result is sum(loss * mask) / sum(mask) per replica (Keras then
    divides by the number of replicas under tf.distribute, as for its own losses).

    Args:
        label_smoothing: eps (paper: 0.1).
        pad_id: label id to ignore.
    """

    def __init__(self, label_smoothing: float = 0.1, pad_id: int = 0, name="smoothed_xent", **kw):
        super().__init__(name=name, **kw)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1). Received: {label_smoothing}")
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        labels, log_probs, mask = _log_probs_and_mask(y_true, y_pred, self.pad_id)
        eps = self.label_smoothing
        loss = (1.0 - eps) * _token_nll(labels, log_probs) - eps * ops.mean(log_probs, axis=-1)
        # Keras' "sum_over_batch_size" divides by batch * len; weighting real tokens by
        # (batch * len) / n_real makes that the mean over real tokens.
        total = ops.cast(ops.size(mask), "float32")
        weight = mask * ops.divide_no_nan(total, ops.sum(mask))
        return loss * weight  # (batch, tgt_len)

    def get_config(self):
        config = super().get_config()
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id})
        return config


class _MaskedTokenMetric(keras.metrics.Metric):
    """Accumulates a per-token quantity and the number of non-padding tokens."""

    def __init__(self, pad_id: int = 0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def per_token(self, labels, log_probs):
        raise NotImplementedError

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels, log_probs, mask = _log_probs_and_mask(y_true, y_pred, self.pad_id)
        self.total.assign_add(ops.sum(self.per_token(labels, log_probs) * mask))
        self.count.assign_add(ops.sum(mask))

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(_MaskedTokenMetric):
    """Share of non-padding target tokens whose argmax prediction is right."""

    def __init__(self, pad_id: int = 0, name="accuracy", **kwargs):
        super().__init__(pad_id=pad_id, name=name, **kwargs)

    def per_token(self, labels, log_probs):
        predicted = ops.cast(ops.argmax(log_probs, axis=-1), "int32")
        return ops.cast(ops.equal(predicted, labels), "float32")

    def result(self):
        return ops.divide_no_nan(self.total, self.count)


@keras.saving.register_keras_serializable(package="keras_transformer")
class Perplexity(_MaskedTokenMetric):
    """exp(mean negative log-likelihood) over non-padding tokens (no label smoothing)."""

    def __init__(self, pad_id: int = 0, name="perplexity", **kwargs):
        super().__init__(pad_id=pad_id, name=name, **kwargs)

    def per_token(self, labels, log_probs):
        return _token_nll(labels, log_probs)

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
