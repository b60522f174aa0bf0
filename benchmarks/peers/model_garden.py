"""TF Model Garden: `official.nlp.modeling.models.Seq2SeqTransformer` of our sizes.

Train: a plain `tf.function` step (tape, our label-smoothed loss, tf-keras Adam(0.9, 0.98,
1e-9) with our schedule's formula). Decode: its own beam search in one `tf.function`, with an
EOS id outside the vocabulary so that every hypothesis runs exactly `out_length` steps. Model
Garden ends each stack with a LayerNorm whatever the norm position, so post-norm configs (tiny,
base) have 4 * d_model more parameters than ours; pre-norm ones (quick) match exactly.
"""

from __future__ import annotations

import numpy as np

from benchmarks.peers.spec import Spec, Unsupported, decode_sources, train_batch

NAME = "tf-model-garden"
NAME_BFLOAT16 = "tf-model-garden-bfloat16"


def build(config, beam_size: int = 1, decode_max_length=None, eos_id=None, **decode):
    """A built `Seq2SeqTransformer` with `config`'s sizes (as model_garden_comparison.py's)."""
    import tensorflow as tf
    from official.nlp.modeling.models import seq2seq_transformer as mg

    stack = dict(
        num_layers=config.num_layers, num_attention_heads=config.num_heads,
        intermediate_size=config.d_ff, activation="relu", dropout_rate=config.dropout,
        attention_dropout_rate=config.attention_dropout, use_bias=True,  # ours has biases
        norm_first=config.norm_position == "pre", norm_epsilon=config.layer_norm_epsilon,
        intermediate_dropout=config.dropout,
    )  # fmt: skip
    garden = mg.Seq2SeqTransformer(
        vocab_size=config.vocab_size, embedding_width=config.d_model,
        dropout_rate=config.dropout, beam_size=beam_size, decode_max_length=decode_max_length,
        encoder_layer=mg.TransformerEncoder(**stack), decoder_layer=mg.TransformerDecoder(**stack),
        eos_id=config.eos_id if eos_id is None else eos_id, **decode,
    )  # fmt: skip
    garden({"inputs": tf.ones((1, 3), tf.int32), "targets": tf.ones((1, 3), tf.int32)})
    return garden


def tf_keras_schedule(d_model: int, warmup_steps: int, scale: float = 1.0):
    """Our `TransformerSchedule` (its keras.ops are TF ops here) as a tf.keras schedule."""
    import tf_keras

    from keras_transformer.training.schedule import TransformerSchedule

    class Schedule(tf_keras.optimizers.schedules.LearningRateSchedule):
        def __init__(self):
            self.formula = TransformerSchedule(d_model, warmup_steps, scale)

        def __call__(self, step):
            return self.formula(step)

    return Schedule()


def make_train(spec: Spec, dtype: str | None = None):
    """`(run(steps), parameters)`: Model Garden takes source and labels and shifts the labels
    right itself (its decoder starts with id 0). `dtype` "mixed_bfloat16": built under
    tf-keras' global policy of that name (layers compute in bfloat16, variables and the
    optimizer stay float32; the logits are cast to float32 for the loss), as Model Garden's
    own trainers do with `mixed_precision_dtype`."""
    import tensorflow as tf
    import tf_keras

    from keras_transformer.training.losses import MaskedLabelSmoothedCrossEntropy

    config = spec.model_config()
    if dtype is not None and config.norm_position == "post":
        raise Unsupported(
            "Model Garden's post-norm TransformerDecoderBlock adds its float32 LayerNorm's "
            f"output to a bfloat16 tensor under {dtype!r} (AddV2 InvalidArgumentError); "
            "compare with --norm-position pre"
        )
    tf_keras.utils.set_random_seed(0)
    garden = _build_under_policy(config, dtype)
    optimizer = tf_keras.optimizers.Adam(
        tf_keras_schedule(config.d_model, spec.warmup_steps), 0.9, 0.98, 1e-9
    )
    loss = MaskedLabelSmoothedCrossEntropy(config.label_smoothing, pad_id=config.pad_id)
    batch = train_batch(spec)
    source, labels = tf.constant(batch["source"]), tf.constant(batch["labels"])

    @tf.function
    def step(source, labels):
        with tf.GradientTape() as tape:
            logits = garden({"inputs": source, "targets": labels}, training=True)
            logits = tf.cast(logits, tf.float32)  # a no-op in float32
            value = tf.reduce_mean(loss.call(labels, logits))  # mean over real tokens
        gradients = tape.gradient(value, garden.trainable_variables)
        optimizer.apply_gradients(zip(gradients, garden.trainable_variables))
        return value

    def run(steps: int) -> None:
        for _ in range(steps):
            value = step(source, labels)
        value.numpy()

    return run, garden.count_params()


def _build_under_policy(config, dtype: str | None):
    """`build(config)` with tf-keras' global dtype policy set to `dtype` (None: as it is)
    while the layers are made, then restored, so that later builds are not affected."""
    import tf_keras

    previous = tf_keras.mixed_precision.global_policy()
    if dtype is not None:
        tf_keras.mixed_precision.set_global_policy(dtype)
    try:
        return build(config)
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)


def make_decode(spec: Spec, model=None):
    """`(run() -> output lengths (batch,), parameters)`; `model` (ours) is not used."""
    import tensorflow as tf
    import tf_keras

    config = spec.model_config()
    tf_keras.utils.set_random_seed(0)
    garden = build(
        config, beam_size=spec.beam, decode_max_length=spec.out_length, alpha=0.6,
        eos_id=config.vocab_size,  # never generated: no hypothesis ends early
    )  # fmt: skip
    search = tf.function(
        lambda source: garden({"inputs": source})["outputs"],  # -> (batch, decoded_length)
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    source = tf.constant(decode_sources(spec))

    def run() -> np.ndarray:
        ids = search(source).numpy()
        return np.full(len(ids), ids.shape[1])  # no EOS: every row is the decoded length

    return run, garden.count_params()
