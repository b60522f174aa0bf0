"""Word alignments from the model's own cross-attention, in TF ops only (the export runs it).

    links = align_tensors(model, tokenizer, ["Click OK."], ["Klicken Sie auf OK."], table)
    links["alignments"]  # string (batch,): b"0-0 0-1 0-2 1-3" (Moses "i-j": source i, output j)
    links["source_index"]  # int32 (batch, output_words): the source word of each output word

Words are whitespace words (`tf.strings.split`): a piece that starts with SentencePiece's
"\u2581" starts a word, the pieces after it belong to it. One full (uncached) decoder pass
reads BOS + the target's pieces (teacher forcing, as `scoring.score_ids`); the attention of
`layer` (the mean over heads, or one `head`) is summed over the pieces of each source word
and each output word, EOS excluded on both sides, and each output word is linked to the
source word that gets the most of it. `row="input"` reads the row where the output piece is
the decoder's input, `row="predict"` the row that predicts it. The defaults were chosen by
alignment error rate on a hand-annotated gold set (benchmarks/data/alignment_gold.tsv;
benchmarks/results/2026-11-26-issue-53-markup.md); a `Translator`'s `alignment`
(`config.AlignmentOptions`, the guided head for a run trained with `--guided-alignment`) is
what its whole-input functions use.

Whole inputs (`translate_with_alignments`): each sentence of the segmenter is translated and
aligned on its own, and the indices are offset by the words of the sentences before it, so the
pairs index the whole input and the whole output. A sentence longer than the model's
`max_length` pieces is aligned on its first `max_length - 1` pieces: later words get no link.
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.config import ALIGNMENT_ROWS, AlignmentOptions
from keras_transformer.data.alignment_corpus import (  # noqa: F401  (re-exported)
    WORD_START,
    piece_words,
    word_start_table,
)
from keras_transformer.data.segmenter import segment
from keras_transformer.data.tokenizer import split_words
from keras_transformer.decoding.scoring import teacher_forcing
from keras_transformer.decoding.search import check_model

ROWS = ALIGNMENT_ROWS
DEFAULT_LAYER = AlignmentOptions().layer  # chosen by measurement (`AlignmentOptions`)
DEFAULT_HEAD = AlignmentOptions().head  # None: the mean over heads
DEFAULT_ROW = AlignmentOptions().row


def cross_attention(model, source, target_in, layer: int, head: int | None) -> tf.Tensor:
    """float32 `(batch, tgt_len, src_len)`: `layer`'s encoder-decoder attention (one `head`,
    or the mean over heads) of one teacher-forced pass over `target_in` (BOS first)."""
    weights = model.attention_weights(source, target_in, "cross")  # N x (b, h, tgt, src)
    chosen = tf.cast(weights[layer], tf.float32)
    if head is None:
        return tf.reduce_mean(chosen, axis=1)  # -> (batch, tgt_len, src_len)
    return chosen[:, head]


def word_links(attention, source_words, target_words) -> tf.Tensor:
    """The source word of each target word, int32 `(batch, target_words)`, -1 where there is
    none: `attention` float `(batch, tgt_len, src_len)` summed over each word's pieces
    (`source_words` `(batch, src_len)`, `target_words` `(batch, tgt_len)` from `piece_words`),
    then the source word with the most."""
    source_words = tf.cast(source_words, tf.int32)
    target_words = tf.cast(target_words, tf.int32)
    n_source = tf.reduce_max(source_words) + 1
    n_target = tf.reduce_max(target_words) + 1
    to_source = tf.one_hot(source_words, tf.maximum(n_source, 1))  # (b, src_len, SW), 0 at -1
    to_target = tf.one_hot(target_words, tf.maximum(n_target, 1))  # (b, tgt_len, TW)
    words = tf.einsum("btk,bts,bsj->bkj", to_target, attention, to_source)  # -> (b, TW, SW)
    best = tf.argmax(words, axis=2, output_type=tf.int32)  # (b, TW)
    has_target = tf.reduce_max(to_target, axis=1) > 0  # (b, TW): the row has this word
    has_source = tf.reduce_max(source_words, axis=1, keepdims=True) >= 0  # (b, 1)
    return tf.where(has_target & has_source, best, -1)


def moses_strings(links, source_offset=None, target_offset=None) -> tf.Tensor:
    """int32 `(batch, target_words)` source indices (-1: none) -> string `(batch,)` of
    "i-j" pairs separated by spaces, by output word; offsets int `(batch,)` are added."""
    links = tf.cast(links, tf.int64)
    batch = tf.shape(links, out_type=tf.int64)[0]
    zeros = tf.zeros([batch], tf.int64)
    source_offset = zeros if source_offset is None else tf.cast(source_offset, tf.int64)
    target_offset = zeros if target_offset is None else tf.cast(target_offset, tf.int64)
    columns = tf.range(tf.shape(links, out_type=tf.int64)[1])[None, :]  # (1, TW)
    pairs = tf.strings.join(
        [
            tf.strings.as_string(links + source_offset[:, None]),
            tf.strings.as_string(columns + target_offset[:, None]),
        ],
        separator="-",
    )  # -> (b, TW)
    pairs = tf.ragged.boolean_mask(pairs, links >= 0)
    return tf.strings.reduce_join(pairs, axis=1, separator=" ")


def align_ids(
    model, source_ids, target_ids, starts, layer=DEFAULT_LAYER, head=DEFAULT_HEAD, row=DEFAULT_ROW
) -> tf.Tensor:
    """int32 `(batch, target_words)`: the source word of each target word (-1: none), from
    right-padded source ids (EOS last, as `translate_ids` takes them) and target ids (the
    tokens to predict, EOS last); `starts` is `word_start_table`'s."""
    config = check_model(model).config
    if row not in ROWS:
        raise ValueError(f"row must be one of {ROWS}. Received: row={row!r}")
    source, labels, target_in = teacher_forcing(config, source_ids, target_ids)  # (b, tgt_len)
    attention = cross_attention(model, source, target_in, layer, head)  # (b, tgt, src)
    if row == "input":  # row t + 1 reads piece t
        attention = tf.pad(attention[:, 1:], [[0, 0], [0, 1], [0, 0]])
    source_words = piece_words(source, starts, config.pad_id, config.eos_id)
    target_words = piece_words(labels, starts, config.pad_id, config.eos_id)
    return word_links(attention, source_words, target_words)


def align_tensors(model, tokenizer, sources, targets, starts, **choice) -> dict:
    """Strings `(batch,)` and `(batch,)`, each pair aligned whole -> `{"alignments": string
    (batch,), "source_index": int32 (batch, target_words)}`; TF ops only. `choice`: `layer`,
    `head`, `row` of `align_ids`."""
    config = check_model(model).config
    sources = tf.convert_to_tensor(sources, tf.string)
    targets = tf.convert_to_tensor(targets, tf.string)
    source = tokenizer.encode_source(sources, config.max_length).to_tensor(config.pad_id)
    target = tokenizer.encode_source(targets, config.max_length).to_tensor(config.pad_id)
    links = tf.cond(
        tf.size(sources) > 0,
        lambda: align_ids(model, source, target, starts, **choice),
        lambda: tf.zeros([0, 0], tf.int32),
    )
    return {"alignments": moses_strings(links), "source_index": links}


def word_offsets(texts, counts) -> tf.Tensor:
    """int64 `(n,)`: the words (`tokenizer.split_words`) of the texts `(n,)` before each one
    in its input (`counts` int `(batch,)`: how many consecutive texts each input has)."""
    words = split_words(texts).row_lengths()  # (n,)
    ragged = tf.RaggedTensor.from_row_lengths(words, tf.cast(counts, tf.int64))
    return (tf.cumsum(ragged, axis=1, exclusive=True)).flat_values


def translate_with_alignments(translator, texts, starts, **choice) -> dict:
    """Whole inputs string `(batch,)` -> `{"translations", "scores", "alignments"}` (batch,):
    `translator`'s translations and, per input, the Moses pairs over its whole source and
    output (see the module docstring); TF ops only. `choice` (`layer`, `head`, `row`):
    default `translator.alignment`."""
    texts = tf.convert_to_tensor(texts, tf.string)
    choice = choice or translator.alignment.kwargs()
    if translator.documents.segment:
        segmentation = segment(texts)
        sentences, counts = segmentation.segments.flat_values, segmentation.segments.row_lengths()
    else:
        segmentation, sentences, counts = None, texts, tf.ones_like(texts, tf.int64)
    out = translator.translate_tensors(sentences)  # each sentence alone: (n,)
    links = align_tensors(translator.model, translator.tokenizer, sentences,
                          out["translations"], starts, **choice)["source_index"]  # fmt: skip
    pairs = moses_strings(
        links, word_offsets(sentences, counts), word_offsets(out["translations"], counts)
    )  # -> (n,)
    per_input = tf.RaggedTensor.from_row_lengths(pairs, counts)
    alignments = tf.strings.reduce_join(
        tf.ragged.boolean_mask(per_input, tf.strings.length(per_input) > 0), axis=1,
        separator=" ",
    )  # fmt: skip
    scores = tf.reduce_sum(tf.RaggedTensor.from_row_lengths(out["scores"], counts), axis=1)
    translations = out["translations"] if segmentation is None else (
        segmentation.join(out["translations"]))  # fmt: skip
    return {"translations": translations, "scores": scores, "alignments": alignments}


def parse_moses(text: str) -> set[tuple[int, int]]:
    """ "0-0 1-2" -> {(0, 0), (1, 2)} (source word, output word)."""
    return {tuple(int(x) for x in pair.split("-")) for pair in text.split()}


def alignment_quality(predicted, gold) -> dict:
    """Precision, recall, F1 and alignment error rate (Och and Ney 2003, sure links only:
    AER = 1 - F1) of predicted Moses strings against gold ones, pooled over all pairs."""
    hits = found = wanted = 0
    for guess, truth in zip(predicted, gold):
        guess, truth = parse_moses(guess), parse_moses(truth)
        hits, found, wanted = hits + len(guess & truth), found + len(guess), wanted + len(truth)
    precision, recall = hits / max(found, 1), hits / max(wanted, 1)
    f1 = 2 * hits / max(found + wanted, 1)
    return {"precision": precision, "recall": recall, "f1": f1, "aer": 1.0 - f1}
