"""Sentence segmentation in stock TensorFlow string ops: the same rules run eagerly in Python,
inside `tf.function`s and inside the exported SavedModel (stock TF Serving, no py_function).

    seg = segment(tf.constant(["Click OK. Then close it.\\n\\nDone."]))
    seg.segments    # ragged string (batch, None): [["Click OK.", "Then close it.", "Done."]]
    seg.separators  # ragged string (batch, None): [[" ", "\\n\\n"]]  (one fewer per input)
    seg.join(translations)  # string (batch,): translations of the segments, separators kept
    split_sentences("Dr. Smith arrived. He sat.")  # ["Dr. Smith arrived.", "He sat."]

How an input is cut. The input is read as words (maximal runs of non-space characters) and
the whitespace runs between them (a "gap"; an input that starts or ends with whitespace has
an empty word there). Each gap is decided by the first rule of `RULES` that matches it; a gap
that no rule matches stays inside its segment. A rule is SRX-like (the localization
industry's Segmentation Rules eXchange): RE2 patterns, each a full match, for the word
before the gap, the whitespace of the gap, the word after it and what precedes the word
before (the word and whitespace before it), and whether to split there.
Split gaps become the separators: an input is exactly `segments[0] + separators[0] +
segments[1] + ...`, so line breaks, blank lines and indentation come back where they were.

To extend the table, add a `Rule` in the right place of `RULES` (first match wins) and a case
for it in tests/test_segmenter.py (the test fails for a rule without one). RE2 has no
look-around: a rule sees two words before the gap and one after it, no more.

The byte U+001F (ASCII unit separator, never text) marks gaps internally: it is read as a
space wherever an input holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import tensorflow as tf

MARK = "\x1f"  # gap marker, see the module docstring
# Whitespace that separates words: ASCII space and controls, and Unicode's spaces except the
# no-break ones (U+00A0, U+2007, U+202F bind "z.\u00a0B." into one word, as they should).
SPACE = r"[\t\n\v\f\r \x{1680}\x{2000}-\x{2006}\x{2008}-\x{200a}\x{2028}\x{2029}\x{205f}\x{3000}]"
LINE_BREAK = r"[\n\v\f\r\x{2028}\x{2029}]"
ANY = r"(?s).*"
OPEN = r"[\"'“‘„‚«‹(\[{¿¡]*"  # opening quotes and brackets before a word
CLOSE = r"[\"'”’«»‹›)\]}]*"  # closing quotes and brackets after a sentence's end
TERMINAL = r"(?s).*[.!?…。！？‼⁇⁈⁉]+" + CLOSE  # a word that may end a sentence
# Abbreviations that never end a sentence, lower case, without their final period (matched
# case-insensitively). English, German, French; names of the form "X." are `initial`.
ABBREVIATIONS = (
    r"e\.g|i\.e|cf|vs|viz|approx|appr|dept|est|incl|excl|min|max|misc|resp|"
    r"mr|mrs|ms|dr|prof|sr|jr|st|mt|ft|gen|gov|rev|hon|capt|col|lt|sgt|"
    r"jan|feb|apr|jun|jul|aug|sep|sept|oct|nov|dec|"
    r"z\.b|u\.a|d\.h|o\.ä|u\.ä|s\.o|s\.u|u\.u|bzw|usw|vgl|ggf|evtl|inkl|exkl|zzgl|bspw|bzgl|"
    r"sog|ca|gem|hr|fr|frl|str|tel|jh|mio|mrd|eigtl|allg|dt|engl|franz|urspr|"
    r"mme|mlle|env|p\.ex|av|apr\.j\.-c"
)
# Abbreviations that stand before a number ("No. 5", "Fig. 3", "Nr. 7", "S. 12").
NUMBER_LABELS = r"no|nos|nr|fig|figs|pp|vol|art|sec|ch|chap|tab|abb|abs|bd|kap"
# Words after a German ordinal ("am 3. Mai", "im 19. Jahrhundert"); "number 7. Der" ends a
# sentence, so a number alone does not decide.
AFTER_ORDINAL = (
    r"(?i:januar|jänner|februar|märz|april|mai|juni|juli|august|september|oktober|november|"
    r"dezember|jan|feb|mär|apr|jun|jul|aug|sep|sept|okt|nov|dez|jahrhundert|jh|jahrtausend|"
    r"auflage|ausgabe|stock|klasse|platz|kapitel|januari|février|mars|avril|juin|juillet|"
    r"août|septembre|octobre|novembre|décembre)\.?,?"
)
# What comes before a list item's number: the start of the input or of a line, or the end
# of a sentence or a colon ("Steps: 1. Open the file. 2. Save it.").
ITEM_START = f"(?s){SPACE}*|.*[.!?…:。！？]{CLOSE}{SPACE}+|.*{LINE_BREAK}{SPACE}*"


@dataclass(frozen=True)
class Rule:
    """One row of the segmentation table: at a gap whose word before, whitespace and word
    after fully match `before`, `space` and `after` (RE2), split there if `split`.
    `earlier` matches what precedes the word before: the word and whitespace before it (""
    where the word before is the input's first)."""

    name: str
    split: bool
    before: str = ANY
    space: str = ANY
    after: str = ANY
    earlier: str = ANY


RULES = (
    # The input's own edges: leading and trailing whitespace is a separator, never text.
    Rule("start_of_input", split=True, before=""),
    Rule("end_of_input", split=True, after=""),
    # Lines are never joined: lists, headings, one sentence per line.
    Rule("line_break", split=True, space=f"(?s).*{LINE_BREAK}.*"),
    # "e.g. this", "Dr. Smith", "z.B. so", "(vgl. Kap. 3)".
    Rule("abbreviation", split=False, before=f"{OPEN}(?i:{ABBREVIATIONS})\\."),
    # Initials and one-letter abbreviations: "J. R. R. Tolkien", "z. B.", "u. a.", "S. 12".
    Rule("initial", split=False, before=f"{OPEN}\\pL\\."),
    # "No. 5", "Fig. 3" (but "No. That is wrong." ends a sentence).
    Rule("number_label", split=False, before=f"{OPEN}(?i:{NUMBER_LABELS})\\.", after=r"\d.*"),
    # Numbered list items: "1. Open the file.", "Steps: 2. Save it."
    Rule("list_item", split=False, earlier=ITEM_START, before=f"{OPEN}\\d{{1,3}}\\."),
    # German ordinals: "am 3. Mai", "im 19. Jahrhundert".
    Rule("ordinal", split=False, before=f"{OPEN}\\d{{1,4}}\\.", after=AFTER_ORDINAL),
    # A sentence does not start in lower case: "etc. and more", "wait... what", "4.0.1. or".
    Rule("lowercase_next", split=False, after=f"{OPEN}\\p{{Ll}}{ANY}"),
    # Everything else after . ! ? … (quotes and brackets may follow) ends a sentence; versions
    # "4.0.1", decimals "3.5", URLs and paths hold no whitespace, so they have no gap inside.
    Rule("sentence_end", split=True, before=TERMINAL),
)


class Segmentation(NamedTuple):
    """Segments of a batch of inputs and the whitespace between them.

    segments: ragged string `(batch, None)`, at least one per input (possibly empty: an
        empty or whitespace-only input, or the edge of one with leading/trailing space).
    separators: ragged string `(batch, None)`, one fewer per input than its segments.
    """

    segments: tf.RaggedTensor
    separators: tf.RaggedTensor

    def join(self, translations) -> tf.Tensor:
        """String `(num_segments,)` or `(num_segments, k)` (one per flat segment, in order)
        -> `(batch,)` or `(batch, k)`: each input's translations joined by its separators."""
        translations = tf.convert_to_tensor(translations, tf.string)
        counts = self.segments.row_lengths()  # (batch,)
        ends = tf.cumsum(counts) - 1  # each input's last segment
        total = tf.reduce_sum(counts)
        not_last = tf.tensor_scatter_nd_update(
            tf.ones([total], tf.bool), ends[:, None], tf.zeros_like(ends, tf.bool)
        )  # (num_segments,)
        after = tf.scatter_nd(
            tf.where(not_last), self.separators.flat_values, [total]
        )  # -> (num_segments,): the separator after each segment, "" after the last
        if translations.shape.rank == 2:  # -> (num_segments, k): StringJoin does not broadcast
            after = tf.broadcast_to(after[:, None], tf.shape(translations))
        joined = tf.strings.join([translations, after])
        return tf.strings.unsorted_segment_join(  # -> (batch[, k])
            joined, self.segments.value_rowids(), self.segments.nrows()
        )


def _full_match(texts: tf.Tensor, pattern: str) -> tf.Tensor:
    if pattern == ANY:
        return tf.ones_like(texts, tf.bool)
    return tf.strings.regex_full_match(texts, pattern)


def decide_gaps(before, space, after, earlier=None, rules=RULES) -> tf.Tensor:
    """Bool `(gaps,)`: split at each gap (the words before and after it, its whitespace and
    what precedes the word before: string `(gaps,)`; `earlier` defaults to ""), by the first
    matching rule of `rules` (no split where none matches)."""
    earlier = tf.zeros_like(before) if earlier is None else earlier
    decided = tf.zeros_like(before, tf.bool)
    split = tf.zeros_like(before, tf.bool)
    for rule in rules:
        match = _full_match(before, rule.before) & _full_match(after, rule.after)
        match &= _full_match(space, rule.space) & _full_match(earlier, rule.earlier)
        match &= ~decided
        if rule.split:
            split |= match
        decided |= match
    return split


def segment(texts, rules=RULES) -> Segmentation:
    """Split each input of string `(batch,)` into sentences (see the module docstring).

    Pure TF ops: traceable in a `tf.function` with an input signature (for export)."""
    texts = tf.strings.regex_replace(tf.convert_to_tensor(texts, tf.string), MARK, " ")
    marked = tf.strings.regex_replace(texts, f"({SPACE}+)", f"{MARK}\\1{MARK}")
    parts = tf.strings.split(marked, MARK)  # (batch, 2 * gaps + 1): word, space, ..., word
    values = parts.values  # (parts,)
    rows = parts.value_rowids()  # (parts,)
    position = tf.range(tf.size(values, out_type=tf.int64)) - tf.gather(parts.row_starts(), rows)
    is_space = tf.equal(position % 2, 1)
    gaps = tf.where(is_space)  # (gaps, 1): index of each gap's whitespace in `values`
    gap = gaps[:, 0]
    has_earlier = tf.gather(position, gap) >= 3  # a word and a gap before the word before
    earlier = tf.strings.join(
        [tf.gather(values, tf.maximum(gap - 3, 0)), tf.gather(values, tf.maximum(gap - 2, 0))]
    )
    earlier = tf.where(has_earlier, earlier, "")  # (gaps,)
    split = decide_gaps(
        tf.gather(values, gap - 1), tf.gather(values, gap), tf.gather(values, gap + 1),
        earlier, rules,
    )  # fmt: skip  # (gaps,)
    split_part = tf.scatter_nd(gaps, split, tf.shape(values, out_type=tf.int64))  # (parts,)
    follows_split = tf.concat([[False], split_part[:-1]], axis=0)  # a word after a split gap
    starts = tf.equal(position, 0) | follows_split  # first part of a segment
    segment_id = tf.cumsum(tf.cast(starts, tf.int32)) - 1  # (parts,); gaps join the word before
    keep = ~split_part
    segment_rows = tf.boolean_mask(rows, starts)  # (num_segments,): the input of each
    flat = tf.strings.unsorted_segment_join(
        tf.boolean_mask(values, keep), tf.boolean_mask(segment_id, keep),
        num_segments=tf.size(segment_rows),
    )  # fmt: skip  # -> (num_segments,)
    # Built from their row ids, which the segments then keep: `join` and the documents' score
    # sums read them without computing them again. Valid by construction: no assertion ops.
    segments = tf.RaggedTensor.from_value_rowids(flat, segment_rows, parts.nrows(), validate=False)
    separators = tf.boolean_mask(values, split_part)  # (num_segments - batch,)
    return Segmentation(
        segments=segments,
        separators=tf.RaggedTensor.from_row_lengths(
            separators, segments.row_lengths() - 1, validate=False
        ),
    )


def split_sentences(text: str) -> list[str]:
    """The segments of one Python string (eagerly, with the same ops as the export)."""
    segments = segment(tf.constant([text])).segments[0].numpy()
    return [s.decode("utf-8", errors="replace") for s in segments]
