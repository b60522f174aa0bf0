"""Teacher-forced scoring: log P(target | source) under the full model, no search.

    scores = score_pairs(model, tokenizer, ["Hello world."], ["Hallo Welt."])
    # {"log_prob": (n,), "per_token": (n,), "score": (n,)} float32 NumPy arrays, input order
    out = score_ids(model, source_ids, target_ids)       # TF ops: any batch of ids
    out = score_tensors(model, tokenizer, sources, targets)  # TF ops, strings (the export)

A target y is scored as the model was trained: the decoder reads BOS + y's pieces and
predicts y's pieces + EOS, one full (uncached) forward pass, padding masked. For |y| predicted
tokens (EOS included):

    log_prob  = sum_t log softmax(logits_t)[y_t]
    per_token = log_prob / |y|
    score     = log_prob / ((5 + |y|) / 6) ** alpha     (GNMT length penalty, as beam search)

so scoring a beam-search output gives the score beam search reported for it. Sources are
prepared as for translation (cut to the model's `max_length`, empty -> [EOS]); targets keep at
most `max_length - 1` pieces plus EOS.

Documents (`score_document_tensors`, the export's `score`): source and target are split into
sentences by the same segmenter; where both have the same number of segments, the pairs are
scored one by one and summed (log_prob and score: sums; per_token: log_prob over all target
tokens), as `Translator` scores a document; a pair of empty segments adds 0. Where the
counts differ (a human translation that merged two sentences), the whole pair is scored as
one. A sentence that translation cut into parts (`DocumentOptions.segment_limit`) is scored
whole, so its score differs from the translation's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.checks import check_int
from keras_transformer.config import SearchOptions
from keras_transformer.data.segmenter import segment
from keras_transformer.decoding.beam_search import length_penalty
from keras_transformer.decoding.search import check_model, prepare_source
from keras_transformer.model import Transformer
from keras_transformer.tracing import graph_function

OUTPUT_KEYS = ("log_prob", "per_token", "score")


def score_ids(model: Transformer, source_ids, target_ids, alpha: float | None = None) -> dict:
    """Scores of right-padded target ids given right-padded source ids (dense or ragged).

    Args:
        model: a `Transformer`.
        source_ids: int `(batch, src_len)`, as `translate_ids` takes them.
        target_ids: int `(batch, tgt_len)`, the tokens to predict (EOS last, if any, as beam
            search returns them), `pad_id` after; at most `max_length` are kept.
        alpha: length penalty exponent (default: the paper's, `SearchOptions().alpha`).

    Returns:
        `{"log_prob", "per_token", "score"}`, each float32 `(batch,)`.
    """
    config = check_model(model).config
    alpha = SearchOptions().alpha if alpha is None else alpha
    source, labels, inputs = teacher_forcing(config, source_ids, target_ids)
    logits = model({"source": source, "target": inputs}, training=False)  # (b, tgt_len, vocab)
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
    chosen = tf.gather(log_probs, labels, batch_dims=2)  # -> (batch, tgt_len)
    mask = tf.not_equal(labels, config.pad_id)  # (batch, tgt_len)
    log_prob = tf.reduce_sum(tf.where(mask, chosen, 0.0), axis=1)  # (batch,)
    length = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)  # (batch,)
    return {
        "log_prob": log_prob,
        "per_token": log_prob / tf.cast(tf.maximum(length, 1), tf.float32),
        "score": log_prob / length_penalty(length, alpha),
    }


def teacher_forcing(config, source_ids, target_ids) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """One teacher-forced pass's tensors: the prepared source (`prepare_source`), the labels
    int32 `(batch, tgt_len)` (`target_ids`, dense or ragged, cut at `max_length`, EOS last)
    and the decoder input `(batch, tgt_len)`: the labels shifted right behind BOS."""
    source, _ = prepare_source(source_ids, config)
    if isinstance(target_ids, tf.RaggedTensor):
        target_ids = target_ids.to_tensor(default_value=config.pad_id)
    labels = tf.cast(tf.convert_to_tensor(target_ids), tf.int32)[:, : config.max_length]
    bos = tf.fill([tf.shape(labels)[0], 1], config.bos_id)
    return source, labels, tf.concat([bos, labels[:, :-1]], axis=1)  # shifted right


def encode_target(tokenizer, texts, max_length: int) -> tf.RaggedTensor:
    """Target strings `(batch,)` -> the ids to predict `(batch, None)`: pieces (at most
    `max_length - 1`) then EOS, the same layout as sources."""
    return tokenizer.encode_source(texts, max_length)


def _string_pairs(sources, targets) -> tuple[tf.Tensor, tf.Tensor]:
    """Both as string tensors, `sources` gated on the two batch sizes being equal."""
    sources = tf.convert_to_tensor(sources, tf.string)
    targets = tf.convert_to_tensor(targets, tf.string)
    same = tf.debugging.assert_equal(
        tf.size(sources), tf.size(targets), message="source and target batch sizes differ"
    )
    with tf.control_dependencies([same]):
        sources = tf.identity(sources)
    return sources, targets


def score_tensors(model: Transformer, tokenizer, sources, targets, alpha=None) -> dict:
    """Strings `(batch,)` and `(batch,)` -> `score_ids`'s dict; TF ops only (traceable with an
    input signature, as the export's `score` signature is)."""
    config = check_model(model).config
    sources, targets = _string_pairs(sources, targets)
    source = tokenizer.encode_source(sources, config.max_length)
    target = encode_target(tokenizer, targets, config.max_length)
    return score_ids(
        model,
        source.to_tensor(default_value=config.pad_id),
        target.to_tensor(default_value=config.pad_id),
        alpha,
    )


def score_document_tensors(model: Transformer, tokenizer, sources, targets, alpha=None) -> dict:
    """Whole inputs: strings `(batch,)` and `(batch,)` -> `score_ids`'s dict, segment pairs
    summed (see the module docstring); TF ops only (the export's `score` signature)."""
    config = check_model(model).config
    sources, targets = _string_pairs(sources, targets)
    source_segments, target_segments = segment(sources).segments, segment(targets).segments
    aligned = tf.equal(source_segments.row_lengths(), target_segments.row_lengths())  # (batch,)
    whole_rows = tf.where(~aligned)[:, 0]  # (unaligned,): scored as one pair each

    def pairs(segments, texts):  # -> (pairs,): aligned rows' segments, then unaligned rows
        in_aligned = tf.gather(aligned, segments.value_rowids())
        return tf.concat(
            [tf.boolean_mask(segments.flat_values, in_aligned), tf.gather(texts, whole_rows)], 0
        )

    pairs_source = pairs(source_segments, sources)
    pairs_target = pairs(target_segments, targets)
    in_aligned = tf.gather(aligned, source_segments.value_rowids())
    pairs_row = tf.concat(
        [tf.boolean_mask(source_segments.value_rowids(), in_aligned), whole_rows], axis=0
    )  # -> (pairs,): the input each pair belongs to
    out = score_tensors(model, tokenizer, pairs_source, pairs_target, alpha)
    empty = tf.equal(pairs_source, "") & tf.equal(pairs_target, "")  # (pairs,): adds 0
    lengths = tf.minimum(tokenizer.tokenize(pairs_target).row_lengths() + 1, config.max_length)
    batch = tf.size(sources, out_type=tf.int64)

    def per_input(values):
        values = tf.where(empty, tf.zeros_like(values), values)
        return tf.math.unsorted_segment_sum(values, pairs_row, batch)  # -> (batch,)

    log_prob = per_input(out["log_prob"])
    tokens = per_input(tf.cast(lengths, tf.float32))
    return {
        "log_prob": log_prob,
        "per_token": log_prob / tf.maximum(tokens, 1.0),
        "score": per_input(out["score"]),
    }


def score_pairs(
    model: Transformer,
    tokenizer,
    sources: Sequence[str],
    targets: Sequence[str],
    search: SearchOptions | None = None,
    batch_size: int = 64,
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """Score many (source, target) strings in batches of similar length.

    Args:
        search: only its `alpha` is used, for `score` (default: the paper's 0.6).
        batch_size: pairs per forward pass.
        progress: a tqdm progress bar (stderr).

    Returns:
        `{"log_prob", "per_token", "score"}`: float32 NumPy arrays `(len(sources),)`, in input
        order.
    """
    config = check_model(model).config
    sources, targets = list(sources), list(targets)
    if len(sources) != len(targets):
        raise ValueError(f"Got {len(sources)} sources for {len(targets)} targets.")
    check_int("batch_size", batch_size)
    alpha = (search or SearchOptions()).alpha
    out = {key: np.zeros(len(sources), np.float32) for key in OUTPUT_KEYS}
    if not sources:
        return out
    source_ids = tokenizer.encode_source(tf.constant(sources), config.max_length)
    target_ids = encode_target(tokenizer, tf.constant(targets), config.max_length)
    lengths = np.maximum(source_ids.row_lengths().numpy(), target_ids.row_lengths().numpy())
    order = np.argsort(lengths, kind="stable")  # batch similar lengths together
    spec = tf.TensorSpec([None, None], tf.int32)
    run = graph_function(lambda s, t: score_ids(model, s, t, alpha), input_signature=[spec, spec])
    starts = range(0, len(sources), batch_size)
    if progress:
        from tqdm import tqdm

        starts = tqdm(starts, desc="scoring", unit="batch")
    for start in starts:
        index = order[start : start + batch_size]
        batch = [
            tf.gather(ids, index).to_tensor(default_value=config.pad_id)
            for ids in (source_ids, target_ids)
        ]  # each: (batch, len)
        for key, value in run(*batch).items():
            out[key][index] = value.numpy()
    return out
