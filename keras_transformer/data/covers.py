"""Where an element's words went in a translation, by range queries (`data.markup` places
tags with it): for each element, the first and last output word aligned to one of its source
words, and where an element with none goes.

    low, high, slot = covers(first, last, links)  # each int32 (batch, T)

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
