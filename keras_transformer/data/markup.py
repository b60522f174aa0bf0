"""Inline markup in stock TensorFlow string ops: parse tags out of whole inputs, and put them
back around the aligned words of the translation (the export runs both; no py_function).

    parsed = parse_markup(tf.constant(['Choose <span class="emph">Format - Cells</span>.']))
    parsed.text      # string (batch,): "Choose Format - Cells."  (what the model translates)
    parsed.tags      # ragged string (batch, None): ['<span class="emph">', '</span>']
    parsed.first     # ragged int32: the first word each tag encloses   [1, 1]
    parsed.last      # ragged int32: the last word each tag encloses    [3, 3]
    parsed.warnings  # string (batch,): "" or why the input is translated as text
    insert_tags(parsed, translations, links)  # string (batch,): tags around the aligned words

Parsing. A tag is `<name attr="..." ...>`, `</name>`, `<name .../>`, a comment `<!-- -->`,
a CDATA section, a `<!DOCTYPE ...>` or `<?xml ...?>`, or a whole `<script>`/`<style>`
element (`TAG`, attributes kept byte for byte); a `<` that does not start one ("a < b") is
text (the grammar, and the kinds and pairs of tags: `data/tag_grammar.py`). HTML's void
elements (`<br>`, `<img ...>`: `VOID`) enclose nothing, as `<x/>`, unless
their input closes one (XML's `<link ...>text</link>`). Hidden
elements never reach the model and come back byte for byte (`hide_elements`, a first pass):
comments (and the other `<!...>`, `<?...>`), scripts, styles, and elements marked
`translate="no"` or with the `notranslate` class, with everything inside them (a
`translate="yes"` inside one is hidden too). Each is then one tag that encloses nothing,
separated from the words beside it by a space where the input had one (`ParsedMarkup.spaced`).
A page's layout (whitespace between tags that holds a line break, or that has no word on one
side, and whitespace between a tag and the text's first or last word) travels with the tag
beside it (`_layout`), so line breaks and indentation come back on their side of each tag.
Character references (`&lt;`, `&nbsp;`, `&#8211;`, `&#xE9;`: `data.entities`) are decoded
for the model, and the output's text is escaped again (`& < >`; the other characters come
back as themselves, which HTML reads the same). Words are
whitespace words of the text without tags; a tag that ends a line or block (`BREAKS`: `<br>`,
`<p>`, `<li>`, ...) between two words separates them. An opening tag stands before the word it
touches or the next one, a closing tag after the word it touches or the one before, and a tag
that encloses nothing after the word it follows directly ("Line<br/>"), else before the next.
An input whose tags do not nest (unclosed, crossing, stray closing tags) is translated as
text (tags included), one with more than `MAX_TAGS` tags without its tags (bounded work), and
both get a warning: a request never fails on markup.

Placing. Each element covers the output words aligned to its source words (`links`: the
source word of each output word), from the first to the last. The covers are then made to
nest as the source does, in document order: an element is clipped into its parent's cover
and starts after its previous sibling's (so siblings keep their order). An element left with
no words (or one that had none: `<br/>`, `<x id="1"/>`, `<b></b>`, `it.<a id="e"></a>`: no
text inside, glued to a word or not) is placed after the output word aligned to the nearest
source word before it. The tags are then written in document order at their places, so the
output is well-formed, with the same tags, attributes and nesting as the source; whole words
inherit a tag, less the punctuation at their edges that the element's source text did not
hold there (`data.edges`: "Open <a>file</a>." -> "Öffnen Sie die <a>Datei</a>.").
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.data.covers import covers, place_tags
from keras_transformer.data.edges import edge_counts, edge_pieces
from keras_transformer.data.entities import REFERENCE, decode_entities, references_to
from keras_transformer.data.tag_grammar import (  # noqa: F401  (re-exported)
    ATTRIBUTE,
    COMMENT,
    NAME,
    RAW,
    RAW_ELEMENT,
    TAG,
    VOID,
    TagStructure,
    tag_structure,
)
from keras_transformer.data.tokenizer import SPACES, SPACES_RE2, remove_invisible

MARK = "\x1e"  # stands for a tag while words are counted (never text: removed from inputs)
GAP = "\x1f"  # marks whitespace runs while output words are split (as the segmenter's)
HIDDEN = "\x1d"  # in the placeholder of a hidden element (never text: removed from inputs)
SPLIT = "\x1c"  # the space a line break between two words stands for (removed from inputs)
SPACE_REFERENCES = references_to(SPACES)  # "&nbsp;", "&#8239;", ...: spaces to the model
# HTML's `translate="no"` and the `notranslate` class (Google's and Microsoft's web
# translators honour both): the element, content and all, comes back as it was.
_NO = r"""(?:"\s*no\s*"|'\s*no\s*'|no)"""
_CLASS = r"""(?:"(?:[^"]*\s)?notranslate(?:\s[^"]*)?"|'(?:[^']*\s)?notranslate(?:\s[^']*)?')"""
NO_TRANSLATE_ATTRIBUTE = rf"(?i:translate\s*=\s*{_NO}|class\s*=\s*(?:{_CLASS}|notranslate))"
NO_TRANSLATE = rf"<{NAME}(?:{ATTRIBUTE})*\s+{NO_TRANSLATE_ATTRIBUTE}(?:{ATTRIBUTE})*\s*>"
# HTML elements that end a line or a block: between two words they separate them ("here<br>to"
# is two words, where "Ze<b>ll</b>en" is one), so the model reads a space there.
BREAKS = ("br", "hr", "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "td",
          "th", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "section",
          "article", "header", "footer", "nav", "aside", "figure", "figcaption", "option",
          "title")  # fmt: skip
_BREAK = f"(?i:{'|'.join(BREAKS)})"
BREAK_TAG = f"</{_BREAK}\\s*>|<{_BREAK}(?:{ATTRIBUTE})*\\s*/?>"
# Per input; more is translated without tags, with a warning (bounded work: the pairing and
# placing loops run once per tag; a page of ~4,000 tags costs ~0.3 s of them on a 2-core
# CPU, against ~10 s to translate its words: benchmarks/results/2026-11-28-many-tags.md).
MAX_TAGS = 4096
MALFORMED = "malformed markup (unclosed, crossing or stray tags): translated as text"
TOO_MANY = f"more than {MAX_TAGS} tags: translated without them"


class ParsedMarkup(NamedTuple):
    """Inputs without their tags, and where the tags were (see the module docstring).

    text: string `(batch,)`, what the model translates (the input where its tags do not nest).
    tags: ragged string `(batch, None)`, every tag in document order (none where `warnings`).
    kind: ragged int32, 0 opening, 1 closing, 2 self-closing.
    first, last: ragged int32, the words an element encloses (read on opening and
        self-closing tags; `last < first` where it encloses none).
    partner: ragged int32, the matching tag of an opening or closing tag (itself otherwise).
    spaced: ragged int32, of an element not to translate: 1 if whitespace stood before it in
        the input, 2 after it, 3 both (the output separates it from the words there); else 0.
    edge: ragged int32, the punctuation characters an element's text begins with (read on its
        opening tag) and ends with (on its closing tag); -1 on tags that stand outside any
        (line and block elements, tags that enclose nothing): `data.edges`.
    markup: bool `(batch,)`, the input had tags or entities (its output text is escaped).
    warnings: string `(batch,)`.
    """

    text: tf.Tensor
    tags: tf.RaggedTensor
    kind: tf.RaggedTensor
    first: tf.RaggedTensor
    last: tf.RaggedTensor
    partner: tf.RaggedTensor
    spaced: tf.RaggedTensor
    edge: tf.RaggedTensor
    markup: tf.Tensor
    warnings: tf.Tensor


def tag_parts(texts) -> tuple[tf.RaggedTensor, tf.Tensor]:
    """string `(batch,)` -> ragged string `(batch, 2 N + 1)`, each input cut into text, tag,
    text, ..., text (N tags; texts between two tags may be empty), and int64
    `(all_parts,)` each part's position in its input (odd: a tag)."""
    marked = tf.strings.regex_replace(texts, f"({TAG})", f"{MARK}\\1{MARK}")
    parts = tf.strings.split(marked, MARK)
    return parts, tf.ragged.range(parts.row_lengths()).flat_values


def _tags_of(parts, position) -> tf.RaggedTensor:
    return tf.ragged.boolean_mask(parts, parts.with_flat_values(tf.equal(position % 2, 1)))


def split_tags(texts) -> tf.RaggedTensor:
    """string `(batch,)` -> ragged string `(batch, None)`: every tag, in order."""
    return _tags_of(*tag_parts(texts))


def in_order(mask, values, default) -> tf.Tensor:
    """bool `(n,)` and `(k,)` values, k the count of True -> `(n,)`: the values at the True
    entries, in order, `default` (a scalar of their dtype) elsewhere."""
    index = tf.maximum(tf.cumsum(tf.cast(mask, tf.int32)) - 1, 0)
    padded = tf.concat([values, [default]], 0)  # index 0 exists where `values` is empty
    return tf.where(mask, tf.gather(padded, index), default)


def tag_words(texts) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """For each tag of `texts` `(batch,)`: `(ended, begun)` int32 ragged `(batch, None)`, the
    words of the text without tags that end before it and that begin before it."""
    marked = tf.strings.regex_replace(texts, TAG, MARK)
    # Words as the model reads them (`tokenizer.split_words`' rule, kept in step with it): a
    # no-break space (or "&nbsp;") parts two words, invisible characters alone make none.
    marked = tf.strings.regex_replace(marked, f"{SPACES_RE2}|{SPACE_REFERENCES}", " ")
    tokens = tf.strings.split(marked)  # (batch, tokens): whitespace runs of the marked text
    words = remove_invisible(tf.strings.regex_replace(tokens.flat_values, MARK, ""))
    is_word = tf.cast(tf.strings.length(words) > 0, tf.int32)  # (all_tokens,)
    before = tokens.with_flat_values(is_word)
    words_before = tf.cumsum(before, axis=1, exclusive=True).flat_values  # (all_tokens,)
    pieces = tf.strings.split(tokens.flat_values, MARK)  # (all_tokens, marks + 1)
    lengths = tf.cumsum(tf.strings.length(pieces), axis=1)[:, :-1]  # text before each mark
    text_before = tf.cast(lengths.flat_values > 0, tf.int32)  # (all_marks,)
    token_of_mark = lengths.value_rowids()  # (all_marks,)
    ended = tf.gather(words_before, token_of_mark)
    begun = ended + text_before * tf.gather(is_word, token_of_mark)
    marks_per_input = tf.math.unsorted_segment_sum(
        lengths.row_lengths(), tokens.value_rowids(), tokens.nrows()
    )  # (batch,)
    return (
        tf.RaggedTensor.from_row_lengths(ended, marks_per_input),
        tf.RaggedTensor.from_row_lengths(begun, marks_per_input),
    )


def hide_elements(texts) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """string `(batch,)` -> `(texts, hidden, spaced)`: each comment, raw text element and
    element marked not to be translated (`NO_TRANSLATE`, with everything inside it) replaced
    by a placeholder tag that encloses nothing (`<br HIDDEN/>` for a line or block element,
    else `<x HIDDEN/>`); string `(m,)` the hidden elements byte for byte, in document order
    over the batch; int32 `(m,)` their `ParsedMarkup.spaced`. Inputs whose tags do not nest,
    or with more than `MAX_TAGS`, unchanged."""
    parts, position = tag_parts(texts)  # (batch, 2 N + 1): text, tag, text, ..., text
    is_tag = tf.equal(position % 2, 1)
    tags = _tags_of(parts, position)  # (batch, N)
    found = tag_structure(tags, MAX_TAGS)
    ok = (found.few & found.nests)[:, None]  # (batch, 1)
    opens = found.dense(tf.strings.regex_full_match(tags.flat_values, NO_TRANSLATE), False)
    opens &= tf.equal(found.kind, 0) & ok  # (batch, T): an element not to translate begins
    alone = found.dense(tf.strings.regex_full_match(tags.flat_values, f"{COMMENT}|{RAW_ELEMENT}"),
                        False) & ok  # fmt: skip
    closes = tf.equal(found.kind, 1) & tf.gather(opens, tf.maximum(found.partner, 0), batch_dims=1)
    delta = tf.cast(opens, tf.int32) - tf.cast(closes, tf.int32)
    depth = tf.cumsum(delta, axis=1)  # (batch, T): hidden elements open after each tag
    starts = (opens | alone) & tf.equal(depth - delta, 0)
    inside = (depth - delta > 0) & ~starts  # a tag inside a hidden element, or its end
    # Part 2k + 1 is tag k, part 2k + 2 the text after it (inside where depth[k] > 0); the
    # flags get one more column of False for the parts of inputs with many tags.
    flags = tf.pad(tf.stack([inside, depth > 0, starts], 2), [[0, 0], [0, 1], [0, 0]])
    row = tf.cast(parts.value_rowids(), tf.int32)
    k = (tf.cast(position, tf.int32) - 1) // 2
    k = tf.where((k < 0) | (k >= tf.shape(depth)[1]), tf.shape(depth)[1], k)
    inside, after, starts = tf.unstack(tf.gather_nd(flags, tf.stack([row, k], 1)), axis=1)
    joins = tf.where(is_tag, inside, after)  # (all_parts,): the part continues a hidden one
    begins = is_tag & starts
    group = tf.cumsum(tf.cast(~joins, tf.int32)) - 1  # (all_parts,): one per kept part
    groups = tf.reduce_sum(tf.cast(~joins, tf.int32))
    whole = tf.strings.unsorted_segment_join(parts.flat_values, group, groups)  # (groups,)
    hidden = tf.math.unsorted_segment_max(tf.cast(begins, tf.int32), group, groups) > 0
    block = tf.strings.regex_full_match(whole, f"(?s)<{_BREAK}[\\s/>].*")
    placeholder = tf.where(block, f"<br {HIDDEN}/>", f"<x {HIDDEN}/>")
    rows = tf.math.unsorted_segment_min(row, group, groups)
    kept = tf.RaggedTensor.from_value_rowids(tf.where(hidden, placeholder, whole), rows,
                                             tf.shape(texts, tf.int32)[0])  # fmt: skip
    # Whitespace around a hidden element with text: the parts just before and after it.
    index = tf.range(tf.size(group))
    before = tf.gather(parts.flat_values, tf.maximum(
        tf.math.unsorted_segment_min(index, group, groups) - 1, 0))  # fmt: skip
    after = tf.gather(parts.flat_values, tf.minimum(
        tf.math.unsorted_segment_max(index, group, groups) + 1, tf.size(group) - 1))  # fmt: skip
    layout = r"[ \t\f\v]*[\r\n][ \t\r\n\f\v]*"  # a line's end: the page's, not the text's
    spaced = tf.cast(tf.strings.regex_full_match(before, r"(?s).*\s")
                     & ~tf.strings.regex_full_match(before, layout), tf.int32) + 2 * tf.cast(
        tf.strings.regex_full_match(after, r"(?s)\s.*")
        & ~tf.strings.regex_full_match(after, layout), tf.int32)  # fmt: skip
    spaced *= tf.cast(tf.strings.regex_full_match(whole, f"(?s){NO_TRANSLATE}.*"), tf.int32)
    return (tf.strings.reduce_join(kept, axis=1), tf.boolean_mask(whole, hidden),
            tf.boolean_mask(spaced, hidden))  # fmt: skip


def _unhide(tags, hidden, spaced) -> tuple[tf.Tensor, tf.Tensor]:
    """Flat string tags `(all_tags,)` -> the same with each placeholder of `hide_elements`
    replaced by its element (both in document order over the batch), and int32 `(all_tags,)`
    the `ParsedMarkup.spaced` of each tag."""
    placeholder = tf.strings.regex_full_match(tags, f"(?s).*{HIDDEN}.*")
    return (tf.where(placeholder, in_order(placeholder, hidden, ""), tags),
            in_order(placeholder, spaced, 0))  # fmt: skip


def _layout(parts, position, ok) -> tuple[tf.RaggedTensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """A page's layout: whitespace that stands between two tags, or between a tag and the
    input's start or end, and holds a line break or has no word on one side, goes with the
    tag before it (at the start: the tag after it), and so does the whitespace between a tag
    and the text's first word (its last word: with the tag after it; `SPLIT`s there are
    dropped), where `ok` `(batch,)`; `parts` and `position` as `tag_parts` gives them. ->
    `(texts, before, after, trim)`: the texts (as parts) with the moved runs made one space
    between words (else nothing), string `(all_tags,)` the whitespace to write before and
    after each tag, and bool `(batch,)` x 2 whether the text's leading and trailing
    whitespace moved (the model's text drops it; the parts keep it, for the words' places)."""
    flat, rows = parts.flat_values, parts.value_rowids()
    is_text = tf.equal(position % 2, 0)
    words = is_text & tf.strings.regex_full_match(flat, f"(?s).*[^\\s{SPLIT}].*")
    words = tf.cast(words, tf.int64)
    seen = tf.cumsum(words, exclusive=True)
    before = seen - tf.gather(tf.gather(seen, parts.row_starts()), rows)  # in its own row
    total = tf.math.segment_sum(words, rows)
    between = (before > 0) & (tf.gather(total, rows) - before - words > 0)
    blank = is_text & tf.strings.regex_full_match(flat, f"[ \\t\\r\\n\\f\\v{SPLIT}]+")
    moves = blank & (tf.strings.regex_full_match(flat, r"(?s).*[\r\n].*") | ~between)
    moves &= tf.gather(ok & (parts.row_lengths() > 1), rows)
    # Of the moved runs between two words, the last one leaves the one space that parts them.
    gap = tf.where(moves & between, seen, -1)  # the words before it, across the batch
    last = tf.math.unsorted_segment_max(position, tf.maximum(gap, 0), tf.size(flat, tf.int64) + 1)
    space = (gap >= 0) & tf.equal(position, tf.gather(last, tf.maximum(gap, 0)))
    # The text's own edges: the whitespace before its first word, where a tag stands before
    # it, goes with that tag; the whitespace after its last word with the tag after it.
    inner = tf.gather(ok, rows) & is_text & (words > 0)
    head = inner & tf.equal(before, 0) & (position > 0)
    tail = inner & tf.equal(tf.gather(total, rows) - before - words, 0)
    tail &= position < tf.gather(parts.row_lengths(), rows) - 1
    size = tf.strings.length(flat)
    space_run = f"[\\s{SPLIT}]+"
    start = size - tf.strings.length(tf.strings.regex_replace(flat, f"^{space_run}", ""))
    start = tf.where(head, start, 0)
    end = tf.where(
        tail, tf.strings.length(tf.strings.regex_replace(flat, f"{space_run}$", "")), size
    )
    heads = tf.strings.substr(flat, tf.zeros_like(start), start)  # (all_parts,)
    tails = tf.strings.substr(flat, end, size - end)
    given = tf.strings.join([tf.where(moves, flat, ""), heads])  # to the tag before the part
    given, tails = (tf.strings.regex_replace(x, SPLIT, "") for x in (given, tails))
    padded = tf.concat([[""], given, [""]], 0)  # padded[i + 1] is part i
    suffix = tf.boolean_mask(padded[2:], ~is_text)  # the part after each tag
    first = tf.strings.join([tf.where(tf.equal(position, 0) & moves, given, ""), tails])
    prefix = tf.boolean_mask(first[:-1], ~is_text[1:])  # the part before each tag
    flat = tf.where(moves, tf.where(space, " ", ""), flat)
    flat = tf.strings.regex_replace(flat, SPLIT, " ")
    trim = tf.stack([tf.math.unsorted_segment_max(tf.cast(x, tf.int32), rows, parts.nrows()) > 0
                     for x in (head, tail)], 1)  # fmt: skip
    return parts.with_flat_values(flat), prefix, suffix, trim


def _empty(parts, position, found: TagStructure) -> tf.Tensor:
    """bool `(all_tags,)`: the tags of an element with no text but whitespace between its
    opening and closing tag (the characters of text parts before each, counted across the
    batch, are equal); False in inputs with more than `MAX_TAGS` tags."""
    flat = parts.flat_values
    is_text = tf.equal(position % 2, 0)
    chars = tf.strings.length(tf.strings.regex_replace(flat, f"[\\s{SPLIT}]+", ""), "UTF8_CHAR")
    seen = tf.cumsum(tf.where(is_text, chars, 0), exclusive=True)  # (all_parts,)
    before = found.dense(tf.boolean_mask(seen, ~is_text), -1)  # (batch, T)
    paired = tf.equal(before, tf.gather(before, tf.maximum(found.partner, 0), batch_dims=1))
    empty = paired & (found.partner >= 0)  # (batch, T), both tags of the element
    rows = found.tags.value_rowids()
    column = tf.ragged.range(found.tags.row_lengths()).flat_values
    inside = tf.gather(found.few, rows)
    index = tf.stack([rows, tf.where(inside, column, 0)], 1)
    return inside & tf.gather_nd(tf.pad(empty, [[0, 0], [0, 1]]), index)


def parse_markup(texts) -> ParsedMarkup:
    """string `(batch,)` -> `ParsedMarkup` (see the module docstring). TF ops only."""
    texts = tf.convert_to_tensor(texts, tf.string)
    texts = tf.strings.regex_replace(texts, f"[{MARK}{GAP}{HIDDEN}{SPLIT}]", " ")
    hint = tf.strings.regex_full_match(texts, r"(?is).*(?:<!|<\?|<script|<style|translate).*")
    texts, hidden, spaced = tf.cond(
        tf.reduce_any(hint), lambda: hide_elements(texts),
        lambda: (texts, tf.constant([""]), tf.constant([0])),
    )  # fmt: skip
    # A space before a break glued to words on both sides: "here<br>to" -> "here <br>to" (as
    # SPLIT: the model reads a space, the output writes none where no word follows).
    texts = tf.strings.regex_replace(texts, f"(\\S)({BREAK_TAG})(\\S)", f"\\1{SPLIT}\\2\\3")
    parts, position = tag_parts(texts)  # (batch, 2 N + 1): text, tag, text, ..., text
    is_tag = tf.equal(position % 2, 1)  # (all_parts,)
    tags = _tags_of(parts, position)  # (batch, N)
    found = tag_structure(tags, MAX_TAGS)
    ok = found.few & found.nests
    laid_parts, before, after_tag, trim = _layout(parts, position, ok)
    laid = tf.strings.reduce_join(laid_parts, axis=1)
    ended, begun = tag_words(laid)
    kind, partner, dense = found.kind, found.partner, found.dense
    after = dense(begun.flat_values, 0) - 1  # the last word begun before a closing tag
    # An opening tag stands before the word it touches or the next one ("Ze<b>ll</b>en"); one
    # that encloses nothing right after a word ("Line<br/>", "end<hr>") stands after it.
    # An element with no text inside ("it.<a id='e'></a>") encloses nothing, as "<br/>" does.
    empty = _empty(laid_parts, position, found)  # (all_tags,)
    alone = tf.equal(kind, 2) | (tf.equal(kind, 0) & dense(empty, False))
    first = tf.where(alone, after + 1, dense(ended.flat_values, 0))  # (batch, T)
    last = tf.where(
        tf.equal(kind, 0) & ~alone, tf.gather(after, tf.maximum(partner, 0), batch_dims=1),
        first - 1,
    )  # fmt: skip
    lengths = tf.where(ok, tf.minimum(found.count, MAX_TAGS), 0)

    def ragged(values):
        return tf.RaggedTensor.from_tensor(values, lengths=lengths)

    entity = f"(?s).*(?:{REFERENCE}).*"
    markup = ok & ((found.count > 0) | tf.strings.regex_full_match(texts, entity))
    stripped = tf.strings.regex_replace(laid, TAG, "")
    stripped = tf.where(trim[:, 0], tf.strings.regex_replace(stripped, r"^\s+", ""), stripped)
    stripped = tf.where(trim[:, 1], tf.strings.regex_replace(stripped, r"\s+$", ""), stripped)
    texts = tf.strings.regex_replace(texts, SPLIT, " ")
    text = tf.where(markup, decode_entities(stripped), tf.where(found.few, texts, stripped))
    tag_texts, tag_spaced = _unhide(tags.flat_values, hidden, spaced)
    tag_texts = tf.strings.join([before, tag_texts, after_tag])
    tag_kind = found.flat_kind
    stops = tf.equal(tag_kind, 2) | empty | tf.strings.regex_full_match(tags.flat_values, BREAK_TAG)
    begins, ends = edge_counts(laid_parts, position, in_order(is_tag, stops, False))
    edge = tf.where(stops, -1, tf.where(tf.equal(tag_kind, 0), begins, ends))
    return ParsedMarkup(
        text=text, tags=ragged(dense(tag_texts, "")), kind=ragged(kind), first=ragged(first),
        last=ragged(last), partner=ragged(partner), spaced=ragged(dense(tag_spaced, 0)),
        edge=ragged(dense(edge, -1)), markup=markup,
        warnings=tf.where(found.few, tf.where(found.nests, "", MALFORMED), TOO_MANY),
    )  # fmt: skip


def insert_tags(parsed: ParsedMarkup, translations, links) -> tf.Tensor:
    """string `(batch,)` translations of `parsed.text` and their links (int32 `(batch, TW)`
    or ragged: the source word of each output word, -1 none) -> string `(batch,)` with the
    tags put back (see the module docstring); text escaped where the input had markup."""
    translations = tf.convert_to_tensor(translations, tf.string)
    if isinstance(links, tf.RaggedTensor):
        links = links.to_tensor(-1)
    links = tf.cast(links, tf.int32)
    kind = parsed.kind.to_tensor(-1)  # (batch, T)
    low, high, empty_slot = covers(parsed.first.to_tensor(0), parsed.last.to_tensor(-1), links)
    marked = tf.strings.regex_replace(translations, r"(\s+)", f"{GAP}\\1{GAP}")
    parts = tf.strings.split(marked, GAP)  # (batch, 2k+1): word, space, word, ...
    is_word = tf.strings.length(parts) > 0
    position = tf.ragged.range(parts.row_lengths())
    is_word &= tf.equal(position % 2, 0)
    words = tf.reduce_sum(tf.cast(is_word, tf.int32), axis=1)  # (batch,)
    slots = place_tags(kind, low, high, empty_slot, words)  # (batch, T)
    valid = kind >= 0
    # A closing tag in the leading run of closing tags at its slot follows the word before.
    not_close = tf.cast(valid & ~tf.equal(kind, 1), tf.int32)
    seen = tf.cumsum(not_close, axis=1, exclusive=True)  # (batch, T)
    first_here = tf.searchsorted(tf.where(valid, slots, tf.int32.max), slots, side="left")
    leading = tf.equal(seen, tf.gather(seen, first_here, batch_dims=1)) & tf.equal(kind, 1)
    after_previous = (leading & (slots > 0)) | (slots >= words[:, None])
    word = tf.where(after_previous, slots - 1, slots)  # (batch, T): the word it attaches to
    word = tf.maximum(word, 0)
    side = tf.cast(after_previous, tf.int32)
    flat_rows = tf.broadcast_to(tf.range(tf.shape(kind)[0])[:, None], tf.shape(kind))
    max_words = tf.reduce_max(words) + 1
    segment = (tf.boolean_mask(flat_rows, valid) * max_words + tf.boolean_mask(word, valid)) * 2
    segment += tf.boolean_mask(side, valid)  # (tags,): non-decreasing in document order
    total = tf.shape(kind)[0] * max_words * 2
    # An element not to translate keeps the whitespace between it and the word it touches.
    spaced = parsed.spaced.to_tensor(0)
    tags = parsed.tags.to_tensor("")
    ends = (
        tf.strings.regex_full_match(tags, r"(?s).*\s"),
        tf.strings.regex_full_match(tags, r"(?s)\s.*"),
    )
    tags = tf.where(~after_previous & (spaced >= 2) & ~ends[0], tf.strings.join([tags, " "]), tags)
    tags = tf.where(
        after_previous & (spaced % 2 == 1) & ~ends[1], tf.strings.join([" ", tags]), tags
    )
    emitted, core, rest = edge_pieces(parsed, parts, is_word, valid, tags, word, side, segment)
    attached = tf.strings.unsorted_segment_join(emitted, segment, total)
    attached = tf.reshape(attached, [-1, max_words, 2])  # (batch, words + 1, before/after)
    attached = tf.strings.join([attached, rest])  # the run's characters after its last tag
    word_index = tf.cumsum(tf.cast(is_word, tf.int32), axis=1) - 1  # (batch, parts)
    text = parts.flat_values  # of the parts not words: whitespace, nothing to escape
    index = tf.stack(
        [tf.cast(parts.value_rowids(), tf.int32), tf.maximum(word_index.flat_values, 0)], 1
    )
    pieces = tf.strings.join([tf.gather_nd(attached[:, :, 0], index), tf.gather_nd(core, index),
                              tf.gather_nd(attached[:, :, 1], index)])  # fmt: skip
    pieces = tf.where(is_word.flat_values, pieces, text)
    # A single space between two words goes where a tag beside it brings the page's own
    # whitespace (its layout: `_layout`), which already parts them.
    row = tf.cast(parts.value_rowids(), tf.int32)
    previous = word_index.flat_values  # of a space: the word before it
    inner = ~is_word.flat_values & tf.equal(text, " ") & (previous >= 0)
    inner &= previous + 1 < tf.gather(words, row)
    end_of = tf.gather_nd(attached[:, :, 1], tf.stack([row, tf.maximum(previous, 0)], 1))
    following = tf.minimum(previous + 1, max_words - 1)
    start_of = tf.gather_nd(attached[:, :, 0], tf.stack([row, following], 1))
    laid = tf.strings.regex_full_match(end_of, r"(?s).*\s") | tf.strings.regex_full_match(
        start_of, r"(?s)\s.*"
    )
    pieces = tf.where(inner & laid, "", pieces)
    joined = tf.strings.reduce_join(parts.with_flat_values(pieces), axis=1)
    no_words = tf.strings.join([attached[:, 0, 0], translations, attached[:, 0, 1]])
    return tf.where(words > 0, joined, no_words)
