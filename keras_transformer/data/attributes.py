"""Attribute values a reader sees, translated with the text: `alt`, `title`, `placeholder`,
`label`, `abbr` (HTML's translatable attributes that need no element check) and `aria-label`
(read aloud by screen readers). Stock TensorFlow string ops (the export runs them).

    found = find_values(tf.constant(['<img src="a.png" alt="A red car">', "</b>"]))
    found.values  # string (k,): ["A red car"]  (decoded, to translate)
    put_values(found, tf.constant(["Ein rotes Auto"]))
    # string (2,): ['<img src="a.png" alt="Ein rotes Auto">', "</b>"]

A value is translated where its tag is one tag (a hidden element is kept whole: its
attributes too), the tag carries no `translate="no"` or `notranslate` class, and the value
holds a letter. Everything else in the tag stays byte for byte; a translated value is
written back escaped (`&amp; &lt; &gt;` and its own quote), an unquoted one in double quotes.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.data.entities import decode_entities, escape_text
from keras_transformer.data.markup import ATTRIBUTE, MARK, NAME, NO_TRANSLATE_ATTRIBUTE

ATTRIBUTES = ("alt", "title", "placeholder", "label", "abbr", "aria-label")
_VALUE = r"""(?:"[^"]*"|'[^']*'|[^\s"'<>=`]+)"""
TRANSLATABLE = rf"\s+(?i:{'|'.join(ATTRIBUTES)})\s*=\s*{_VALUE}"
ONE_TAG = rf"\s*<{NAME}(?:{ATTRIBUTE})*\s*/?>\s*"  # with the layout's whitespace around it
KEPT = rf"\s*<{NAME}(?:{ATTRIBUTE})*\s+{NO_TRANSLATE_ATTRIBUTE}(?:{ATTRIBUTE})*\s*/?>\s*"


class FoundValues(NamedTuple):
    """parts: ragged string `(n, None)`, each tag cut around its attributes (odd parts are
    attributes); where: bool, the same shape, the parts whose value is translated; heads:
    string `(k,)`, those attributes up to their value's first character; quotes: string
    `(k,)`, `"`, `'` or "" (unquoted); values: string `(k,)`, decoded, to translate."""

    parts: tf.RaggedTensor
    where: tf.RaggedTensor
    heads: tf.Tensor
    quotes: tf.Tensor
    values: tf.Tensor


def find_values(tags) -> FoundValues:
    """string `(n,)` tags -> `FoundValues` (see the module docstring)."""
    tags = tf.convert_to_tensor(tags, tf.string)
    eligible = tf.strings.regex_full_match(tags, ONE_TAG) & ~tf.strings.regex_full_match(tags, KEPT)
    marked = tf.strings.regex_replace(tags, f"({ATTRIBUTE})", f"{MARK}\\1{MARK}")
    parts = tf.strings.split(marked, MARK)  # (n, 2 a + 1): before, attribute, between, ...
    odd = tf.equal(tf.ragged.range(parts.row_lengths()).flat_values % 2, 1)
    flat = parts.flat_values
    where = odd & tf.gather(eligible, parts.value_rowids())
    where &= tf.strings.regex_full_match(flat, TRANSLATABLE)
    where &= tf.strings.regex_full_match(flat, r"(?s)[^=]*=.*\pL.*")  # a value with a letter
    chosen = tf.boolean_mask(flat, where)  # (k,)
    heads = tf.strings.regex_replace(chosen, r"(?s)^(\s*[^\s=]+\s*=\s*).*$", r"\1")
    raw = tf.strings.substr(chosen, tf.strings.length(heads), tf.strings.length(chosen))
    quotes = tf.strings.substr(raw, 0, 1)
    quoted = tf.equal(quotes, '"') | tf.equal(quotes, "'")
    inner = tf.strings.regex_replace(raw, r"""(?s)^"(.*)"$|^'(.*)'$""", r"\1\2")
    return FoundValues(
        parts=parts,
        where=parts.with_flat_values(where),
        heads=heads,
        quotes=tf.where(quoted, quotes, ""),
        values=decode_entities(inner),
    )


def _escape(values, quotes):
    values = escape_text(values)
    single = tf.equal(quotes, "'")
    values = tf.where(single, tf.strings.regex_replace(values, "'", "&#39;"), values)
    return tf.where(single, values, tf.strings.regex_replace(values, '"', "&quot;"))


def put_values(found: FoundValues, translations) -> tf.Tensor:
    """`found` and string `(k,)` translations of `found.values` -> string `(n,)` tags with
    each value replaced, escaped and quoted as it was (unquoted: in double quotes)."""
    quotes = tf.where(tf.equal(found.quotes, ""), '"', found.quotes)
    written = tf.strings.join([found.heads, quotes, _escape(translations, quotes), quotes])
    flat = found.parts.flat_values
    index = tf.cumsum(tf.cast(found.where.flat_values, tf.int32)) - 1
    padded = tf.concat([written, [""]], 0)  # index 0 exists where nothing was translated
    flat = tf.where(found.where.flat_values, tf.gather(padded, tf.maximum(index, 0)), flat)
    return tf.strings.reduce_join(found.parts.with_flat_values(flat), axis=1)
