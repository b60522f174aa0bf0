"""Whole inputs in, whole translations out, in TF ops only (the export's signatures run it):

    inputs (batch,) --segment--> sentences --tokenize--> pieces --cut_long--> chunks
        --search, length-sorted batches--> chunk translations --join " "--> sentence
        translations --join with the input's own whitespace--> translations (batch,)

A sentence longer than the limit (`DocumentOptions.segment_limit`) is cut into chunks at
piece boundaries near the limit: after a piece that ends a clause (, ; :) and before a
piece that starts a word where there is one, else before a word, else anywhere; every chunk
is translated. Empty segments (an empty or whitespace-only input, the edges of one with
leading or trailing whitespace) translate to "" with score 0, without a search. A sentence
with nothing the model can read (unknown pieces and no letter or digit: "👍", "你好世界" for a
vocabulary without them, `unreadable`) comes back as it is, with score 0. A sentence
that comes more than once in a batch is searched once (not when sampling).

Scores. A document's translation is its segments' translations, each the best of its own
search, so it maximizes the sum of the segments' scores: that sum is the document's score
(for one segment, the sentence's score: log P(y | x) / lp(|y|)). The k-th best translation of
a document joins every segment's k-th best, with the sum of their scores; the ranks stay
sorted, and for one segment it is that sentence's n-best list.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from keras_transformer.config import DocumentOptions
from keras_transformer.constants import UNK_ID
from keras_transformer.data.input_checks import check_size
from keras_transformer.data.segmenter import segment

CLAUSE_ENDS = (",", ";", ":", "，", "；", "：", "、")
WORD_START = "\u2581"  # SentencePiece's "▁": the piece starts a new word


def piece_table(model_proto: bytes) -> np.ndarray:
    """int32 `(vocab, 3)`: for each piece id, [ends a clause (, ; :), starts a word, writes a
    letter or digit]. A NumPy array: each traced function makes its own constant of it."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=model_proto)
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    table = [[int(p.endswith(CLAUSE_ENDS)), int(p.startswith(WORD_START)),
              int(not processor.is_control(i) and not processor.is_unknown(i)
                  and any(c.isalnum() for c in p))]
             for i, p in enumerate(pieces)]  # fmt: skip
    return np.asarray(table, np.int32)


def unreadable(pieces: tf.RaggedTensor, table) -> tf.Tensor:
    """Ragged piece ids `(rows, None)` -> bool `(rows,)`: the row holds an unknown piece and no
    piece that writes a letter or digit ("👍", "你好世界" for a vocabulary without them):
    nothing the model can read, so `translate_documents` gives the sentence back as it is."""
    unknown = tf.reduce_any(tf.equal(pieces, UNK_ID), axis=1)
    words = tf.gather(tf.convert_to_tensor(table, tf.int32)[:, 2], pieces)  # (rows, None)
    return unknown & ~tf.reduce_any(words > 0, axis=1)


def cut_lengths(pieces: tf.RaggedTensor, limit: int, ranks) -> tf.RaggedTensor:
    """Chunk lengths int64 `(rows, None)` of ragged piece ids `(rows, None)`: each row's chunks
    hold at most `limit` pieces and add up to the row (an empty row: one chunk of 0).

    A row longer than `limit` is cut greedily from its start: each cut falls in the second
    half of the window, at the best rank (3: after a clause end and before a word start; 2:
    after a clause end; 1: before a word start; 0: anywhere), the latest of those. When no
    row is longer than `limit` (most requests) the cutting loop is skipped: one chunk a row."""
    lengths = pieces.row_lengths()  # (rows,)
    return tf.cond(
        tf.reduce_all(lengths <= limit),
        lambda: tf.RaggedTensor.from_tensor(lengths[:, None]),  # (rows, 1)
        lambda: _cut_rows(pieces, lengths, limit, ranks),
    )


def shortest_cut_part(limit: int) -> int:
    """The fewest pieces a part cut from the front of a row longer than `limit` holds: each
    cut falls in the second half of its window (`cut_lengths`)."""
    return max(limit // 2, 1) + 1 if limit > 1 else 1


def _cut_rows(pieces: tf.RaggedTensor, lengths, limit: int, ranks) -> tf.RaggedTensor:
    """`cut_lengths`' cutting loop over every row (`lengths` = `pieces.row_lengths()`)."""
    dense = pieces.to_tensor()  # (rows, width); padding never lies inside a window
    width = tf.shape(dense, out_type=tf.int64)[1]
    table = tf.gather(tf.convert_to_tensor(ranks, tf.int32), dense)  # -> (rows, width, 3)
    clause_before = tf.pad(table[:, :, 0], [[0, 0], [1, 0]])  # (rows, width + 1): cut at p
    word_at = tf.pad(table[:, :, 1], [[0, 0], [0, 1]])  # (rows, width + 1)
    rank = tf.cast(2 * clause_before + word_at, tf.int64)  # (rows, width + 1)
    position = tf.range(width + 1)[None, :]  # (1, width + 1)
    key = rank * (width + 2) + position  # best rank first, then the latest position
    half = shortest_cut_part(limit) - 1

    def body(step, start, ends):
        window = (position > start[:, None] + half) & (position <= start[:, None] + limit)
        best = tf.argmax(tf.where(window, key, -1), axis=1)  # (rows,)
        end = tf.where(lengths - start <= limit, lengths, best)
        active = (start < lengths) | tf.equal(step, 0)
        ends = ends.write(step, tf.where(active, end, -1))
        return step + 1, tf.where(active, end, start), ends

    _, _, ends = tf.while_loop(
        lambda step, start, _: tf.equal(step, 0) | tf.reduce_any(start < lengths),
        body,
        (tf.constant(0), tf.zeros_like(lengths), tf.TensorArray(tf.int64, 0, dynamic_size=True)),
    )
    ends = tf.transpose(ends.stack())  # -> (rows, steps), -1 where a row was done
    ends = tf.ragged.boolean_mask(ends, ends >= 0)  # (rows, None): each chunk's end
    previous = tf.concat([tf.zeros_like(ends[:, :1]), ends[:, :-1]], axis=1)
    return ends - previous


def in_sorted_batches(source: tf.RaggedTensor, batch_size: int, run: Callable, k: int) -> tuple:
    """`run(ids (b, len) int32, batch_index)` -> `(texts (b, k) string, scores (b, k) float32)`
    over length-sorted batches of the ragged source ids `(rows, None)`, results back in row
    order: `(texts (rows, k), scores (rows, k))`; no call for no rows."""
    order = tf.argsort(source.row_lengths(), stable=True)  # (rows,)
    rows = tf.size(order)
    count = (rows + batch_size - 1) // batch_size
    texts = tf.TensorArray(tf.string, count, infer_shape=False)
    scores = tf.TensorArray(tf.float32, count, infer_shape=False)

    def body(i, texts, scores):
        index = order[i * batch_size : (i + 1) * batch_size]
        ids = tf.gather(source, index).to_tensor()  # -> (b, len), 0-padded
        batch_texts, batch_scores = run(ids, i)
        return i + 1, texts.write(i, batch_texts), scores.write(i, batch_scores)

    _, texts, scores = tf.while_loop(lambda i, *_: i < count, body, (0, texts, scores))
    inverse = tf.argsort(order)  # sorted position of each row
    texts, scores = tf.cond(  # the concat of no batches fails: no rows, no concat
        count > 0,
        lambda: (texts.concat(), tf.cast(scores.concat(), tf.float32)),
        lambda: (tf.zeros([0, k], tf.string), tf.zeros([0, k], tf.float32)),
    )
    return tf.gather(texts, inverse), tf.gather(scores, inverse)


def translate_documents(
    texts,
    tokenize: Callable,
    run: Callable,
    options: DocumentOptions,
    max_length: int,
    ranks,
    eos_id: int,
    k: int = 1,
    unique: bool = True,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Translate whole inputs: string `(batch,)` -> `(translations (batch, k), scores (batch,
    k))` (see the module docstring).

    Args:
        tokenize: strings `(n,)` -> ragged int32 piece ids `(n, None)`, without EOS.
        run: `(ids (b, len) int32 with EOS, batch_index)` -> `(texts (b, k), scores (b, k))`.
        options: segmentation, the overlong policy and limits, the batch size.
        ranks: `piece_table` of the vocabulary, int32 `(vocab, 3)`.
        k: the number of columns `run` returns (its n-best width).
        unique: search each distinct sentence of the batch once (a deterministic `run`: the
            search; a sampler draws for every sentence).
    """
    texts = check_size(texts, options.max_input_bytes, "input", "max_input_bytes")
    if options.segment:
        segmentation = segment(texts)
        sentences = segmentation.segments.flat_values  # (segments,)
    else:
        segmentation, sentences = None, texts
    if unique:  # a page's repeated labels, a batch's repeated requests: one search each
        sentences, repeated = tf.unique(sentences)  # (distinct,), (segments,) its row there
    pieces = tokenize(sentences)  # (segments, None)
    if options.overlong == "truncate":
        pieces = pieces[:, : max_length - 1]
        lengths = tf.RaggedTensor.from_tensor(pieces.row_lengths()[:, None])  # one chunk each
    else:
        lengths = cut_lengths(pieces, options.segment_limit(max_length), ranks)
    chunks = tf.RaggedTensor.from_row_lengths(  # (chunks, None); the lengths add up to rows
        pieces.values, lengths.flat_values, validate=False
    )
    filled = tf.where(chunks.row_lengths() > 0)  # (filled, 1): chunks with pieces
    source = tf.gather(chunks, filled[:, 0])
    eos = tf.fill([source.nrows(), 1], tf.constant(eos_id, source.dtype))
    source = tf.concat([source, tf.RaggedTensor.from_tensor(eos)], axis=1)  # (filled, None)
    out_texts, out_scores = in_sorted_batches(source, options.batch_size, run, k)  # (filled, k)
    shape = tf.stack([chunks.nrows(), k])
    chunk_texts = tf.scatter_nd(filled, out_texts, shape)  # -> (chunks, k), "" where empty
    chunk_scores = tf.scatter_nd(filled, out_scores, shape)  # -> (chunks, k), 0 where empty
    # Per segment: the segment ops a ragged reduce would run, without building the ragged
    # tensors (their construction and checks are TF ops that every request pays for)
    segment_of_chunk, segments = lengths.value_rowids(), lengths.nrows()  # (chunks,), ()
    translations = tf.strings.unsorted_segment_join(
        chunk_texts, segment_of_chunk, segments, separator=" "
    )  # -> (segments, k)
    scores = tf.math.unsorted_segment_sum(chunk_scores, segment_of_chunk, segments)
    copied = unreadable(pieces, ranks)[:, None]  # (segments, 1)
    verbatim = tf.strings.unicode_transcode(sentences, "UTF-8", "UTF-8")  # bad bytes: U+FFFD
    translations = tf.where(copied, verbatim[:, None], translations)
    scores = tf.where(copied, tf.zeros_like(scores), scores)
    if unique:
        translations, scores = tf.gather(translations, repeated), tf.gather(scores, repeated)
    if segmentation is None:
        return translations, scores
    document_scores = tf.math.unsorted_segment_sum(  # -> (batch, k)
        scores, segmentation.segments.value_rowids(), segmentation.segments.nrows()
    )
    return segmentation.join(translations), document_scores
