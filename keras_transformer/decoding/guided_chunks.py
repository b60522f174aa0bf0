"""Overlong sentences of a guided translation, cut into chunks as the plain path cuts them
(`documents.cut_lengths`, at `DocumentOptions.segment_limit` pieces; `overlong="truncate"`
keeps one chunk, cut at the model's `max_length`), each chunk searched, the chunks' texts
joined with " " and their scores summed, as `documents.translate_documents` does.

The guides of a sentence go to its chunks so that the sentence's output holds what it
asks for:

- the prefix (and the alternatives after it) to the first chunk: the output starts with it;
- the explicit constraints to the first chunk: they appear in the sentence's output;
- the glossary: each chunk gets the targets of the terms its own source text holds (a term
  that a cut splits is not required);
- `avoid` to every chunk (a phrase that a chunk boundary splits is not blocked).

A sentence within the limit is one chunk with the sentence's own text: nothing changes.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.decoding.documents import cut_lengths, piece_table


class Chunks(NamedTuple):
    """The searches of a guided translation, one per chunk; `(c, ...)` each."""

    pieces: tf.RaggedTensor  # int32: (c, None) source pieces, without EOS
    counts: tf.Tensor  # int64: (m,) chunks of each sentence
    texts: tf.Tensor  # string: (c,) the chunk's source text (for the glossary)
    rows: tf.Tensor  # int32: (c,) the input of each chunk
    first: tf.Tensor  # bool: (c,) the first chunk of its input's first non-empty sentence
    prefix: tf.Tensor  # string: (c,)
    explicit: tf.RaggedTensor  # string: (c, None) the explicit constraints
    avoided: tf.RaggedTensor  # string: (c, None)


def split_sentences(translator, sentences, rows, first, prefix, explicit, avoided) -> Chunks:
    """`Chunks` of `sentences (m,)` (inputs `rows (m,)`, `first (m,)`, `prefix (m,)`,
    explicit constraints and avoided phrases ragged `(m, None)`), by the translator's
    `DocumentOptions.overlong` policy."""
    tokenizer, max_length = translator.tokenizer, translator.config.max_length
    pieces = tokenizer.tokenize(sentences)  # (m, None)
    options = translator.documents
    if options.overlong == "truncate":
        pieces = pieces[:, : max_length - 1]
        lengths = tf.RaggedTensor.from_tensor(pieces.row_lengths()[:, None])  # one chunk each
    else:
        ranks = piece_table(tokenizer.model_proto)
        lengths = cut_lengths(pieces, options.segment_limit(max_length), ranks)  # (m, None)
    chunks = tf.RaggedTensor.from_row_lengths(pieces.values, lengths.flat_values)  # (c, None)
    counts = lengths.row_lengths()  # (m,)
    sentence = tf.cast(lengths.value_rowids(), tf.int32)  # (c,) sentence of each chunk
    starts = tf.cast(lengths.row_starts(), tf.int32)  # (m,) its first chunk
    opening = tf.equal(tf.range(tf.shape(sentence)[0]), tf.gather(starts, sentence))  # (c,)
    single = tf.gather(tf.equal(counts, 1), sentence)
    texts = tf.where(single, tf.gather(sentences, sentence), tokenizer.detokenize(chunks))
    blank = tf.constant([""])
    return Chunks(
        pieces=chunks,
        counts=counts,
        texts=texts,
        rows=tf.gather(rows, sentence),
        first=tf.gather(first, sentence) & opening,
        prefix=tf.where(opening, tf.gather(prefix, sentence), blank),
        explicit=tf.ragged.boolean_mask(
            tf.gather(explicit, sentence), _spread(opening, tf.gather(explicit, sentence))
        ),  # fmt: skip
        avoided=tf.gather(avoided, sentence),
    )


def _spread(flags, ragged) -> tf.RaggedTensor:
    """bool `flags (c,)` repeated over each row of `ragged (c, None)`."""
    return ragged.with_flat_values(tf.repeat(flags, ragged.row_lengths()))


def join_chunks(counts, texts, scores, met) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`(c, k)` results of the chunks -> `(m, k)` of the sentences, `counts (m,)` chunks each:
    texts joined with " ", scores summed, `met` all true."""
    texts = tf.strings.reduce_join(tf.RaggedTensor.from_row_lengths(texts, counts), axis=1,
                                   separator=" ")  # fmt: skip
    scores = tf.reduce_sum(tf.RaggedTensor.from_row_lengths(scores, counts), axis=1)
    met = tf.reduce_all(tf.RaggedTensor.from_row_lengths(met, counts), axis=1)
    return texts, scores, met
