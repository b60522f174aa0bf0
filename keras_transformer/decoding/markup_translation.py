"""Markup in, markup out; protected spans verbatim: the export's `translate_markup`, TF ops.

    out = translate_markup(translator, tf.constant(['Click <b>OK</b> at 3 pm.']), starts)
    out["translations"]  # string (batch,): b'Klicken Sie auf <b>OK</b> um 3 Uhr.'
    out["alignments"]    # string (batch,): Moses "i-j" pairs over the words without tags
    out["warnings"]      # string (batch,): "" or why an input was translated as text

Steps, per batch: parse the tags out of each input (`data.markup.parse_markup`; an input
whose tags do not nest is translated as text and warned about), split the text, and the
values of the tags' translatable attributes (`alt`, `title`, ...: `data.attributes`) as
further inputs, into sentences (`data.segmenter`), translate them
(`Translator.translate_tensors`; a sentence that recurs in the batch, once), align each
sentence with its translation
(`decoding.alignments`), put back every protected span the model did not copy
(`data.protected_spans.restore_spans`), align again (the spans moved words), join the
sentences, write the attributes' translations into their tags, and put the tags back around
the aligned words (`data.markup.insert_tags`). Inputs without markup get the plain
translation with their protected spans restored.
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.data.attributes import find_values, put_values
from keras_transformer.data.input_checks import check_size
from keras_transformer.data.markup import insert_tags, parse_markup
from keras_transformer.data.protected_spans import restore_spans, span_patterns
from keras_transformer.data.segmenter import segment
from keras_transformer.decoding.alignments import align_tensors, moses_strings, word_offsets
from keras_transformer.tracing import graph_function

OUTPUT_KEYS = ("translations", "scores", "alignments", "warnings")


def input_links(links, sentences, translations, counts) -> tf.RaggedTensor:
    """Per-sentence links int32 `(n, TW)` -> ragged int32 `(batch, None)`: the source word
    (in its whole input) of each output word of each whole input (`counts`: sentences per
    input), -1 where none."""
    words = tf.strings.split(translations).row_lengths()  # (n,)
    width = tf.maximum(tf.cast(tf.reduce_max(tf.concat([words, [0]], 0)), tf.int32), 1)
    links = tf.pad(links, [[0, 0], [0, tf.maximum(width - tf.shape(links)[1], 0)]],
                   constant_values=-1)[:, :width]  # fmt: skip
    per_sentence = tf.RaggedTensor.from_tensor(links, lengths=words)  # (n, None)
    offset = tf.gather(word_offsets(sentences, counts), per_sentence.value_rowids())
    values = per_sentence.flat_values
    shifted = tf.where(values >= 0, values + tf.cast(offset, values.dtype), -1)
    nested = tf.RaggedTensor.from_row_lengths(per_sentence.with_flat_values(shifted), counts)
    return nested.merge_dims(1, 2)


def translate_markup(translator, texts, starts, protect: bool = True, **choice) -> dict:
    """Whole inputs with inline markup, string `(batch,)` -> `{"translations", "scores",
    "alignments", "warnings"}`, each `(batch,)` (see the module docstring). `starts`:
    `alignments.word_start_table`; `protect`: restore protected spans; `choice`: the
    alignment's layer, head and row (default `translator.alignment`)."""
    model, tokenizer = translator.model, translator.tokenizer
    choice = choice or translator.alignment.kwargs()
    limit = translator.documents.max_input_bytes
    parsed = parse_markup(check_size(texts, limit, "input", "max_input_bytes"))
    found = find_values(parsed.tags.flat_values)  # alt, title, ...: translated as inputs too
    inputs = tf.concat([parsed.text, found.values], 0)  # (batch + k,)
    batch = tf.shape(parsed.text)[0]
    if translator.documents.segment:
        segmentation = segment(inputs)
        sentences, counts = segmentation.segments.flat_values, segmentation.segments.row_lengths()
    else:
        segmentation, sentences = None, inputs
        counts = tf.ones_like(inputs, tf.int64)
    distinct, repeated = tf.unique(sentences)  # a sentence that recurs: translated once
    out = translator.translate_tensors(distinct)  # (distinct,)
    translations = out["translations"]
    links = align_tensors(model, tokenizer, distinct, translations, starts, **choice)
    if protect:
        patterns = span_patterns(tokenizer.model_proto)  # and what the vocabulary cannot write
        translations, restored = restore_spans(
            distinct, translations, links["source_index"], patterns, with_links=True
        )
        links = align_tensors(model, tokenizer, distinct, translations, starts, **choice)
        index = links["source_index"]  # (distinct, TW); a restored span keeps its own word
        restored = restored.to_tensor(-1, shape=tf.shape(index, out_type=tf.int64))
        links["source_index"] = tf.where(restored >= 0, restored, index)
    translations = tf.gather(translations, repeated)  # -> (n,)
    source_index = tf.gather(links["source_index"], repeated)  # -> (n, TW)
    whole = input_links(source_index, sentences, translations, counts)[:batch]
    joined = translations if segmentation is None else segmentation.join(translations)
    scores = tf.gather(out["scores"], repeated)  # -> (n,)
    scores = tf.reduce_sum(tf.RaggedTensor.from_row_lengths(scores, counts), axis=1)
    tags = parsed.tags.with_flat_values(put_values(found, joined[batch:]))
    return {
        "translations": insert_tags(parsed._replace(tags=tags), joined[:batch], whole),
        "scores": scores[:batch],
        "alignments": moses_strings(whole.to_tensor(-1)),
        "warnings": parsed.warnings,
    }


def translate_lines(translator, lines, markup: bool = True, batch_size: int = 32,
                    progress: bool = False) -> tuple[list, list]:  # fmt: skip
    """Many whole inputs, in batches of similar length, results in input order:
    `(outputs, scores)`, each output a `(translation, alignments, warning)` tuple. With
    `markup`, `translate_markup`; without, plain translations with their alignments."""
    from keras_transformer.decoding.alignments import translate_with_alignments, word_start_table

    starts = word_start_table(translator.tokenizer.model_proto)
    if markup:
        body = lambda texts: translate_markup(translator, texts, starts)  # noqa: E731
    else:
        body = lambda texts: translate_with_alignments(translator, texts, starts)  # noqa: E731
    function = graph_function(body, input_signature=[tf.TensorSpec([None], tf.string)])

    def run(batch, _):
        out = function(tf.constant(batch))
        warnings = out.get("warnings", tf.fill(tf.shape(out["translations"]), ""))
        columns = [out["translations"], out["alignments"], warnings]
        rows = [tuple(x.decode("utf-8") for x in row) for row in zip(*(c.numpy() for c in columns))]
        return rows, out["scores"].numpy().tolist()

    return translator._in_batches(lines, batch_size, progress, run)
