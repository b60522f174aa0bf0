"""Punctuation at an element's edges (`data.markup` places tags with it): an element holds, at
its start and end, the punctuation its source held there, and no more.

    <a href="x">Open</a>.         ->  <a href="x">Öffnen</a>.      (was <a ...>Öffnen.</a>)
    '<code>Darwin</code>', or     ->  '<code>Darwin</code>', oder
    <b>Tools - Options...</b>     ->  <b>Extras - Optionen...</b>  (the dots stay inside)
    <b>f(x)</b>.                  ->  <b>f(x)</b>.                 (one of ")." stays inside)

Words are whitespace words, so a tag beside punctuation in the source ("Open</a>.") lands at
the edge of a whole output word ("Öffnen."). Source side (`edge_counts`): for each opening
tag, how many punctuation characters (Unicode category P) its element's text begins with,
for each closing tag how many it ends with (tags inside skipped; whitespace, a word
character, a line or block tag or a tag that encloses nothing ends the count). Output side
(`edge_places`): a closing tag after an output word keeps that many of the word's trailing
punctuation characters inside (at most `RUN`), the rest follow it; an opening tag before a
word leaves that many of its leading ones inside. Tags of line and block elements (`<p>`,
`<li>`: their punctuation is theirs), tags that carry a page's whitespace, and tags that
enclose nothing stand outside the whole run, as every tag did before.
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.data.entities import decode_entities, escape_text

RUN = 8  # punctuation characters at a word's edge that tags may stand between
PUNCTUATION = r"\pP"


def _chars(texts) -> tf.Tensor:
    return tf.strings.length(texts, unit="UTF8_CHAR")


def edge_counts(parts, position, stops) -> tuple[tf.Tensor, tf.Tensor]:
    """Texts cut by `markup.tag_parts` (ragged `(batch, 2 N + 1)` with `position`), and bool
    `(all_parts,)` the tags that end a count (False at texts) -> int32 `(all_tags,)` twice:
    the punctuation characters the text after each tag begins with, and those the text
    before it ends with."""
    flat = parts.flat_values
    is_text = tf.equal(position % 2, 0)
    text = tf.where(is_text, flat, "")
    text = tf.cond(tf.reduce_any(tf.strings.regex_full_match(text, "(?s).*&.*")),
                   lambda: decode_entities(text), lambda: text)  # fmt: skip
    size = _chars(text)
    lead = size - _chars(tf.strings.regex_replace(text, f"^{PUNCTUATION}+", ""))
    trail = size - _chars(tf.strings.regex_replace(text, f"{PUNCTUATION}+$", ""))
    through = tf.strings.regex_full_match(text, f"{PUNCTUATION}*")  # a count goes on past it
    ends = (is_text & ~through) | stops
    # Every input's first and last part (texts) end a count, so none crosses inputs.
    last = tf.gather(parts.row_lengths(), parts.value_rowids()) - 1
    ends |= tf.equal(position, 0) | tf.equal(position, last)
    length = tf.cumsum(tf.where(ends, 0, size), exclusive=True)  # (all_parts,)
    at = tf.cast(tf.where(ends)[:, 0], tf.int32)  # (stops,) sorted
    index = tf.range(tf.size(flat, tf.int32))
    tags = ~is_text
    after = tf.boolean_mask(index, tags) + 1  # the part after each tag
    stop = tf.gather(at, tf.searchsorted(at, after, side="left"))  # first end at or after it
    begins = tf.gather(length, stop) - tf.gather(length, after) + tf.gather(lead, stop)
    before = after - 2  # the part before each tag
    stop = tf.gather(at, tf.searchsorted(at, before, side="right") - 1)  # last end at or before
    ends_with = tf.gather(length, before + 1) - tf.gather(length, stop + 1)
    return begins, ends_with + tf.gather(trail, stop)


def split_words(words) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """string words (any shape) -> `(lead, core, trail)`: the punctuation each begins with and
    ends with (at most `RUN` characters each; a word of punctuation only is all `trail`) and
    what lies between."""
    size = tf.strings.length(words)
    rest = tf.strings.regex_replace(words, f"{PUNCTUATION}{{1,{RUN}}}$", "")
    trail = tf.strings.substr(words, tf.strings.length(rest), size)
    core = tf.strings.regex_replace(rest, f"^{PUNCTUATION}{{1,{RUN}}}", "")
    start = tf.zeros_like(size)
    return (
        tf.strings.substr(rest, start, tf.strings.length(rest) - tf.strings.length(core)),
        core,
        trail,
    )


def edge_places(run, wanted, movable, after, segment) -> tf.Tensor:
    """Where each tag stands in the punctuation run beside its output word: string `run`
    `(tags,)` (the word's trailing run for a tag after it, `after`, else its leading run),
    int32 `wanted` (`edge_counts`), bool `movable` (else: after the whole run if `after`,
    before it if not) and `segment` (the word and side, non-decreasing: tags in document
    order) -> int32 `(tags,)` characters of the run before each tag, never fewer than the tag
    before it in its segment has, so the tags keep their order."""
    n = _chars(run)
    kept = tf.minimum(wanted, n)
    place = tf.where(after, tf.where(movable, kept, n), tf.where(movable, n - kept, 0))
    # The running maximum within each segment, by thresholds (places are at most RUN).
    start = tf.searchsorted(segment, segment, side="left")  # (tags,): its segment's first tag
    above = tf.cast(place[:, None] >= tf.range(1, RUN + 1)[None, :], tf.int32)  # (tags, RUN)
    seen = tf.cumsum(above, axis=0)
    seen -= tf.gather(seen - above, start)  # within the segment
    return tf.reduce_sum(tf.cast(seen > 0, tf.int32), axis=1)


def edge_pieces(parsed, parts, is_word, valid, tags, word, side, segment):
    """The output's words cut at their punctuation for `markup.insert_tags`: `parts` its
    words and spaces (ragged, `is_word`), the `(batch, T)` tags (`valid`, with the `word` they
    attach to and the `side`, 1 after it) and `segment` `(tags,)` -> string `(tags,)` each
    tag with the run's characters before it, string `(batch, words + 1)` each word's core and
    `(batch, words + 1, 2)` its leading and trailing run's characters after the last tag
    there; all escaped where `parsed.markup`."""
    dense = tf.ragged.boolean_mask(parts, is_word).to_tensor("")  # (batch, words)
    lead, core, trail = split_words(tf.pad(dense, [[0, 0], [0, 1]], constant_values=""))
    rows = tf.broadcast_to(tf.range(tf.shape(word)[0])[:, None], tf.shape(word))  # (batch, T)
    at = tf.boolean_mask(tf.stack([rows, word], 2), valid)  # (tags, 2)
    after = tf.equal(tf.boolean_mask(side, valid), 1)
    run = tf.where(after, tf.gather_nd(trail, at), tf.gather_nd(lead, at))
    edge = tf.boolean_mask(parsed.edge.to_tensor(-1), valid)
    text = tf.boolean_mask(tags, valid)
    kind = tf.boolean_mask(parsed.kind.to_tensor(-1), valid)
    # An opening tag after a word (an element placed with no words) goes to the word's end.
    empty = after & tf.equal(kind, 0)
    movable = (edge >= 0) & (tf.equal(kind, tf.cast(after, tf.int32)) | empty)
    movable &= ~tf.strings.regex_full_match(text, r"(?s)\s.*|.*\s")  # carries layout
    movable &= tf.strings.length(tf.gather_nd(core, at)) > 0  # a word of punctuation stays whole
    place = edge_places(run, tf.where(empty, 0, edge), movable, after, segment)
    first = tf.not_equal(segment, tf.concat([[-1], segment], 0)[:-1])  # (tags,)
    prior = tf.where(first, 0, tf.concat([[0], place], 0)[:-1])
    piece = tf.strings.substr(run, prior, place - prior, unit="UTF8_CHAR")
    escaped = tf.gather(parsed.markup, at[:, 0])
    # Runs are punctuation: of the characters `escape_text` writes, only "&" is one.
    emitted = tf.strings.join([tf.where(escaped, _escape_ampersands(piece), piece), text])
    last = tf.math.unsorted_segment_max(place, segment, tf.size(lead) * 2)
    last = tf.reshape(tf.maximum(last, 0), tf.concat([tf.shape(lead), [2]], 0))
    whole = tf.fill(tf.shape(lead), RUN)
    rest = tf.stack(
        [
            tf.strings.substr(lead, last[:, :, 0], whole, unit="UTF8_CHAR"),
            tf.strings.substr(trail, last[:, :, 1], whole, unit="UTF8_CHAR"),
        ],
        2,
    )
    marked = parsed.markup[:, None]
    rest = tf.where(marked[:, :, None], _escape_ampersands(rest), rest)
    return emitted, tf.where(marked, escape_text(core), core), rest


def _escape_ampersands(texts) -> tf.Tensor:
    return tf.strings.regex_replace(texts, "&", "&amp;")
