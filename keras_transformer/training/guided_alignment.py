"""Guided alignment (Garg et al. 2019; Marian `--guided-alignment`, OpenNMT-tf
`guided_alignment_type: ce`): one cross-attention head learns the word alignments of the
training corpus beside translation.

    model = GuidedAlignmentTransformer(config, weight=1.0)   # the same weights as Transformer
    model.fit(batches)   # inputs {"source", "target", "alignment"}: the term is added

The loss adds `weight * CE(gold, attention)`: for each target position with at least one link,
`-sum_s gold[t, s] log attention[t, s]`, averaged over those positions, where `gold` is the
normalized alignment row of the piece that step t predicts (`data.alignment_corpus.gold_matrix`)
and `attention` the cross-attention probabilities of `GUIDED_LAYER`'s head `GUIDED_HEAD` in the
same (teacher-forced) pass. One head, as OpenNMT-tf and Marian: the other heads stay free for
translation. Inputs without `"alignment"` (dev batches, decoding) run the plain functional graph;
the layers are the `Transformer`'s own, so checkpoints and `final.weights.h5` load into a
`Transformer` as they are.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.config import AlignmentOptions, TransformerConfig
from keras_transformer.data import corpus
from keras_transformer.data.alignment_corpus import count_lines, with_alignments
from keras_transformer.model import Transformer, build_transformer

GUIDED_LAYER = AlignmentOptions.guided().layer  # the last decoder layer (OpenNMT-tf's choice)
GUIDED_HEAD = AlignmentOptions.guided().head  # its first head
ALIGNMENT = "alignment"
EPSILON = 1e-7  # probabilities are clipped here before the log (Keras' epsilon)


def guided_alignment_loss(gold, attention):
    """Mean over target positions with a link of `-sum_s gold log attention`.

    Args:
        gold: float `(batch, tgt_len, src_len)`, rows summing to 1 where linked, else 0.
        attention: float `(batch, tgt_len, src_len)` probabilities (one head).

    Returns:
        float32 scalar (0 for a batch without links).
    """
    gold = ops.cast(gold, "float32")
    attention = ops.cast(attention, "float32")
    log_p = ops.log(ops.clip(attention, EPSILON, 1.0))
    per_row = -ops.sum(gold * log_p, axis=-1)  # (batch, tgt_len)
    linked = ops.cast(ops.sum(gold, axis=-1) > 0, "float32")  # (batch, tgt_len)
    return ops.divide_no_nan(ops.sum(per_row * linked), ops.sum(linked))


@keras.saving.register_keras_serializable(package="keras_transformer")
class GuidedAlignmentTransformer(Transformer):
    """A `Transformer` whose training adds the guided alignment term (module docstring).

    Args:
        config: a `TransformerConfig` (or its `to_dict()`).
        weight: the term's weight (OpenNMT-tf's default, 1.0).
        layer: the decoder layer whose head is guided.
        head: the guided head.

    Call arguments:
        `{"source", "target"}` as `Transformer`, plus optional `"alignment"` float32
        `(batch, tgt_len, src_len)` gold rows (the term is added with `add_loss`).

    Returns:
        float32 logits `(batch, tgt_len, vocab_size)`.
    """

    def __init__(
        self, config: TransformerConfig | dict, weight: float = 1.0, layer: int = GUIDED_LAYER,
        head: int = GUIDED_HEAD, **kwargs,
    ):  # fmt: skip
        super().__init__(config, **kwargs)
        if not weight >= 0.0:
            raise ValueError(f"weight must be >= 0. Received: weight={weight}")
        num_layers, num_heads = self.config.num_layers, self.config.num_heads
        if not (-num_layers <= layer < num_layers and -num_heads <= head < num_heads):
            raise ValueError(
                f"layer and head must exist in a model of {num_layers} layers of {num_heads} "
                f"heads. Received: layer={layer}, head={head}"
            )
        self.weight, self.layer, self.head = float(weight), layer, head

    def call(self, inputs, training=None, mask=None):
        if not isinstance(inputs, dict) or ALIGNMENT not in inputs:
            return super().call(inputs, training=training, mask=mask)
        logits, attention = self.logits_and_attention(
            inputs["source"], inputs["target"], training=training
        )
        term = self.weight * guided_alignment_loss(inputs[ALIGNMENT], attention)
        # Keras' functional models refuse `add_loss` (symbolic graphs only); this call is not
        # symbolic, so the layer's own method records the term for `compute_loss`.
        keras.layers.Layer.add_loss(self, term)
        return logits

    def logits_and_attention(self, source, target, training=None):
        """The functional graph's pass, returning `(logits (batch, tgt_len, vocab), the
        guided head's cross-attention (batch, tgt_len, src_len))`."""
        pad = self.config.pad_id
        source_mask = ops.not_equal(source, pad)  # (batch, src_len)
        memory = self.encoder(
            self.source_embedding(source), padding_mask=source_mask, training=training
        )
        hidden, weights = self.decoder(
            self.token_embedding(target),
            memory,
            memory_mask=source_mask,
            target_mask=ops.not_equal(target, pad),
            training=training,
            return_attention_scores=True,
        )  # fmt: skip  weights: N x (batch, h, tgt_len, src_len)
        logits = self.token_embedding(hidden, reverse=True)  # (batch, tgt_len, vocab)
        return logits, weights[self.layer][:, self.head]  # -> (batch, tgt_len, src_len)

    def get_config(self):
        config = super().get_config()
        config.update(weight=self.weight, layer=self.layer, head=self.head)
        return config


# The run's side (`training.trainer`) ------------------------------------------------------


def build_model(config: TransformerConfig, recipe) -> Transformer:
    """The run's model: `build_transformer(config)`, or with `recipe.guided_alignment` set a
    `GuidedAlignmentTransformer` of `recipe.guided_alignment_weight` (same weights)."""
    if recipe.guided_alignment is None:
        return build_transformer(config)
    return GuidedAlignmentTransformer(
        config, weight=recipe.guided_alignment_weight, name="transformer"
    )


def check_input(recipe, data, prepared: bool) -> None:
    """Guided alignment reads its file beside an on-the-fly corpus: a ValueError naming the
    dataset for a prepared corpus or the tf.data service."""
    if recipe.guided_alignment is not None and (prepared or data.data_service):
        raise ValueError(
            "Guided alignment reads the training split on the fly, beside its alignment file: "
            f"not a prepared corpus or the tf.data service. Received: dataset={data.dataset!r}, "
            f"data_service={data.data_service!r}, guided_alignment={recipe.guided_alignment!r}"
        )


def training_pairs(data, recipe):
    """The training split's `{"source", "target"}` pairs (`corpus.load_split`), each with its
    `"alignment"` line when `recipe.guided_alignment` is set; a ValueError naming both counts
    when the file's lines are not the split's pairs."""
    pairs = corpus.load_split(data, "train")
    path = recipe.guided_alignment
    if path is None:
        return pairs
    wanted, found = sum(1 for _ in corpus.read_split(data, "train")), count_lines(path)
    if wanted != found:
        raise ValueError(
            "The alignment file must have one line per training pair (keras-transformer-align-"
            f"corpus with the same data flags). Received: guided_alignment={path!r} with "
            f"{found} lines, dataset={data.dataset!r} with {wanted} training pairs"
        )
    return with_alignments(pairs, path)
