"""The tag grammar of `data/markup.py` (RE2) and the structure of each input's list of tags,
in stock TF ops: their kinds (opening, closing, enclosing nothing), the partner of each
opening and closing tag (a stack per input; names compared without case, as HTML does), and
whether they nest.

    structure = tag_structure(tags, max_tags=4096)  # tags: ragged string (batch, None)
    structure.kind     # int32 (batch, T): 0 opening, 1 closing, 2 self-closing, -1 none
    structure.partner  # int32 (batch, T): the matching tag, -1 none
    structure.nests    # bool (batch,)
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

NAME = r"[A-Za-z_][\w:.-]*"
ATTRIBUTE = r"\s+[^\s=<>/\"']+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'<>=`]+))?"
# Comments, CDATA sections, `<!DOCTYPE html>` and `<?xml ...?>` are tags that enclose
# nothing, kept byte for byte (`(?s:.*?)`: the shortest).
COMMENT = r"<!--(?s:.*?)-->|<!\[CDATA\[(?s:.*?)\]\]>|<![A-Za-z][^>]*>|<\?[^>]*>"
# HTML's raw text elements: their content is code, never markup or text, so the whole element
# is one tag that encloses nothing ('<script>if (a<b) f("<p>");</script>').
RAW = ("script", "style")
RAW_ELEMENT = "|".join(f"<(?i:{n})(?:{ATTRIBUTE})*\\s*>(?s:.*?)</(?i:{n})\\s*>" for n in RAW)
TAG = f"{COMMENT}|{RAW_ELEMENT}|</{NAME}\\s*>|<{NAME}(?:{ATTRIBUTE})*\\s*/?>"
# HTML's void elements: never closed, so `<br>` encloses nothing, as `<br/>` does.
VOID = ("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr")  # fmt: skip


def pairs(kind, names):
    """One pass over dense `(batch, T)` tags in document order with a stack per input
    (`kind` -1 after an input's last tag): int32 `(batch, T)` partners (an opening tag's
    closing one and back, -1 elsewhere) and bool `(batch,)` whether each input's tags nest."""
    batch, width = tf.shape(kind)[0], tf.shape(kind)[1]
    rows = tf.range(batch)

    def body(i, stack, top, partner, bad):
        opened = tf.gather(stack, tf.maximum(top - 1, 0), batch_dims=1)  # the stack's top
        same = tf.equal(tf.gather(names, opened, batch_dims=1), names[:, i])
        closing, opening = tf.equal(kind[:, i], 1), tf.equal(kind[:, i], 0)
        pairs = closing & (top > 0) & same
        bad |= closing & ~pairs
        at_top = tf.stack([rows, top], 1)
        stack = tf.tensor_scatter_nd_update(
            stack, at_top, tf.where(opening, i, tf.gather_nd(stack, at_top))
        )
        here = tf.stack([rows, tf.fill([batch], i)], 1)
        there = tf.stack([rows, opened], 1)
        partner = tf.tensor_scatter_nd_update(
            partner, here, tf.where(pairs, opened, tf.gather_nd(partner, here))
        )
        partner = tf.tensor_scatter_nd_update(
            partner, there, tf.where(pairs, i, tf.gather_nd(partner, there))
        )
        top += tf.cast(opening, tf.int32) - tf.cast(pairs, tf.int32)
        return i + 1, stack, top, partner, bad

    start = (0, tf.zeros([batch, width + 1], tf.int32), tf.zeros([batch], tf.int32),
             tf.fill([batch, width], -1), tf.zeros([batch], tf.bool))  # fmt: skip
    _, _, top, partner, bad = tf.while_loop(lambda i, *_: i < width, body, start)
    return partner, ~bad & tf.equal(top, 0)


def kinds(tags: tf.RaggedTensor, names) -> tf.Tensor:
    """ragged string `(batch, None)` tags and their flat lower-case names -> int32
    `(all_tags,)`: 0 opening, 1 closing, 2 self-closing (`<x/>`, a comment, a void element's
    `<br>`; but a void-named tag opens an element where its input also holds a closing tag
    of that name: XML's `<link href="...">text</link>`, as in help pages, DocBook, DITA)."""
    flat = tags.flat_values
    closing = tf.strings.regex_full_match(flat, "</(?s).*")
    void_tag = f"(?i)<(?:{'|'.join(VOID)})(?:[\\s>](?s).*)"
    alone = tf.strings.regex_full_match(flat, f"(?s).*/>|{COMMENT}|{RAW_ELEMENT}")
    keys = tf.strings.join([names, tf.strings.as_string(tags.value_rowids())], "\x1e")
    key, index = tf.unique(keys)  # (name, input) pairs
    closed = tf.math.unsorted_segment_max(tf.cast(closing, tf.int32), index, tf.size(key))
    void = tf.strings.regex_full_match(flat, void_tag) & (tf.gather(closed, index) == 0)
    return tf.where(closing, 1, tf.where(alone | void, 2, 0))


class TagStructure(NamedTuple):
    """The tags of a batch of texts, dense `(batch, T <= max_tags)` (inputs with more tags
    than `max_tags`: none): `kind` (-1 after an input's tags), `partner`, and per input the
    tag `count` `(batch,)`, `few` (at most `max_tags`) and `nests`."""

    tags: tf.RaggedTensor
    count: tf.Tensor
    few: tf.Tensor
    kind: tf.Tensor
    partner: tf.Tensor
    nests: tf.Tensor
    flat_kind: tf.Tensor = None  # (all_tags,)

    def dense(self, values, default) -> tf.Tensor:
        """Per-tag flat `values` `(all_tags,)` -> `(batch, T)`, `default` where none."""
        small = tf.gather(self.few, self.tags.value_rowids())  # of an input with few tags
        ragged = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(values, small), tf.boolean_mask(self.tags.value_rowids(), small),
            self.tags.nrows(),
        )  # fmt: skip
        return ragged.to_tensor(default)


def tag_structure(tags: tf.RaggedTensor, max_tags: int) -> TagStructure:
    count = tags.row_lengths()  # (batch,)
    few = count <= max_tags
    parts = TagStructure(tags, count, few, None, None, None)
    names = tf.strings.regex_replace(tags.flat_values, f"^</?({NAME})(?s).*$", r"\1")
    names = tf.strings.lower(names)  # HTML's names know no case: <B>bold</b> is an element
    flat_kind = kinds(tags, names)
    kind = parts.dense(flat_kind, -1)  # (batch, T)
    partner, nests = pairs(kind, parts.dense(names, ""))
    return parts._replace(kind=kind, partner=partner, nests=nests, flat_kind=flat_kind)
