"""Where an element's words went in a translation, by range queries (`data.markup` places
tags with it): for each element, the first and last output word aligned to one of its source
words, and where an element with none goes; then those covers made to nest.

    low, high, slot = covers(first, last, links)  # each int32 (batch, T)
    slots = place_tags(kind, low, high, slot, words)  # int32 (batch, T): each tag's slot

Memory `(LEVELS, batch, source words)` (sparse tables of the first and last output word of
each source word), never `(batch, T, output words)`.
"""

from __future__ import annotations

import tensorflow as tf

LEVELS = 17  # range tables cover 2**17 > any input's words (inputs are under 100,000 bytes)


def _range_tables(values, combine, fill) -> tf.Tensor:
    """int32 `(batch, n)` -> `(LEVELS, batch, n)`: level k, column i holds `combine` over
    columns `[i, i + 2**k)` (`fill` past the end): a sparse table for range queries."""
    tables = [values]
    batch, n = tf.shape(values)[0], tf.shape(values)[1]
    for k in range(1, LEVELS):
        shift = 2 ** (k - 1)
        past = tf.fill([batch, tf.minimum(shift, n)], fill)
        tables.append(combine(tables[-1], tf.concat([tables[-1][:, shift:], past], 1)))
    return tf.stack(tables)


def _range_query(tables, combine, low, high) -> tf.Tensor:
    """`combine` over columns `[low, high]` of each row, int32 `(batch, T)` bounds with
    `0 <= low <= high < n` -> `(batch, T)`: two overlapping blocks of the table's level."""
    size = high - low + 1
    level = tf.reduce_sum(tf.cast(size[..., None] >= 2 ** tf.range(1, LEVELS), tf.int32), -1)
    rows = tf.broadcast_to(tf.range(tf.shape(low)[0])[:, None], tf.shape(low))
    first = tf.gather_nd(tables, tf.stack([level, rows, low], -1))
    last = tf.gather_nd(tables, tf.stack([level, rows, high - 2**level + 1], -1))
    return combine(first, last)


def covers(first, last, links):
    """Where each tag's words went: int32 `(batch, T)` first and last output word aligned to
    a source word in [first, last] (`last < first` where none), and the insertion slot of an
    empty element: after the output word aligned to the nearest source word before `first`.
    `links` int32 `(batch, TW)`: the source word of each output word, -1 none. Range queries
    over the first and last output word of each source word: memory `(batch, words)`, never
    `(batch, T, TW)`."""
    batch, width = tf.shape(links)[0], tf.shape(links)[1]
    words = tf.maximum(tf.reduce_max(tf.concat([links[:, :1] * 0, links, last], 1)) + 1, 1)
    rows = tf.broadcast_to(tf.range(batch)[:, None], tf.shape(links))
    source = tf.where(links >= 0, rows * words + links, batch * words)  # -1: a dropped segment
    position = tf.broadcast_to(tf.range(width)[None, :], tf.shape(links))
    count = batch * words + 1
    lowest = tf.math.unsorted_segment_min(position, source, count)[:-1]  # int32 max: none
    highest = tf.math.unsorted_segment_max(position, source, count)[:-1]  # int32 min: none
    lowest = tf.reshape(tf.minimum(lowest, width), [batch, words])
    highest = tf.reshape(tf.maximum(highest, -1), [batch, words])
    low_table = _range_tables(lowest, tf.minimum, width)
    high_table = _range_tables(highest, tf.maximum, -1)
    some = last >= first
    low_q, high_q = tf.clip_by_value(first, 0, words - 1), tf.clip_by_value(last, 0, words - 1)
    high_q = tf.maximum(high_q, low_q)
    low = tf.where(some, _range_query(low_table, tf.minimum, low_q, high_q), width)
    high = tf.where(some, _range_query(high_table, tf.maximum, low_q, high_q), -1)
    before = tf.clip_by_value(first - 1, 0, words - 1)
    slot = (
        tf.where(first > 0, _range_query(high_table, tf.maximum, tf.zeros_like(before), before), -1)
        + 1
    )
    return tf.where(high >= 0, low, 1), high, tf.maximum(slot, 0)


def place_tags(kind, low, high, slot, words):
    """The output slot of every tag, int32 `(batch, T)` (slot s: before output word s, s =
    `words` after the last): covers made to nest in document order (see the module
    docstring). `kind` dense with -1 after an input's tags; `words` int32 `(batch,)`."""
    batch, width = tf.shape(kind)[0], tf.shape(kind)[1]
    rows = tf.range(batch)

    def body(i, lo, hi, cursor, top, slots):
        k = kind[:, i]
        parent = tf.stack([rows, top - 1], 1)
        plo, phi, pcur = (tf.gather_nd(x, parent) for x in (lo, hi, cursor))
        start = tf.maximum(low[:, i], pcur)
        end = tf.minimum(high[:, i], phi)
        empty_at = tf.clip_by_value(slot[:, i], pcur, tf.maximum(phi + 1, pcur))
        empty = start > end
        start = tf.where(empty, empty_at, start)
        end = tf.where(empty, empty_at - 1, end)
        own = tf.stack([rows, tf.maximum(top - 1, 0)], 1)
        closed_at = tf.where(
            tf.gather_nd(hi, own) >= tf.gather_nd(lo, own), tf.gather_nd(hi, own) + 1,
            tf.gather_nd(lo, own),
        )  # fmt: skip
        place = tf.where(tf.equal(k, 0), start, tf.where(tf.equal(k, 1), closed_at, empty_at))
        slots = tf.tensor_scatter_nd_update(slots, tf.stack([rows, tf.fill([batch], i)], 1),
                                            tf.where(k >= 0, place, 0))  # fmt: skip
        pushed = tf.stack([rows, top], 1)
        opening = tf.equal(k, 0)
        lo = tf.tensor_scatter_nd_update(
            lo, pushed, tf.where(opening, start, tf.gather_nd(lo, pushed))
        )
        hi = tf.tensor_scatter_nd_update(
            hi, pushed, tf.where(opening, end, tf.gather_nd(hi, pushed))
        )
        cursor = tf.tensor_scatter_nd_update(
            cursor, pushed, tf.where(opening, start, tf.gather_nd(cursor, pushed))
        )
        top = top + tf.cast(opening, tf.int32) - tf.cast(tf.equal(k, 1), tf.int32)
        moved = tf.stack([rows, top - 1], 1)  # after a close or a self-closing tag: the parent
        advance = tf.equal(k, 1) | tf.equal(k, 2)
        cursor = tf.tensor_scatter_nd_update(
            cursor, moved,
            tf.where(advance, tf.maximum(tf.gather_nd(cursor, moved), place),
                     tf.gather_nd(cursor, moved)),
        )  # fmt: skip
        return i + 1, lo, hi, cursor, top, slots

    zeros = tf.zeros([batch, width + 1], tf.int32)
    root_hi = tf.tensor_scatter_nd_update(zeros, tf.stack([rows, rows * 0], 1), words - 1)
    start = (
        0,
        zeros,
        root_hi,
        zeros,
        tf.ones([batch], tf.int32),
        tf.zeros([batch, width], tf.int32),
    )
    return tf.while_loop(lambda i, *_: i < width, body, start)[-1]
