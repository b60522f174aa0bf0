"""Translatable attribute values (`data/attributes.py`): which values are found, and tags
rebuilt with new values, read back by Python's `html.parser` (which unescapes values) as the
reference, on hand-written and random tags."""

from html.parser import HTMLParser

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data import attributes as at
from keras_transformer.tracing import graph_function

FIND_CASES = (
    ('<img src="a.png" alt="A red &amp; car">', ["A red & car"]),
    ("<a title='It&#39;s here' href=x>", ["It's here"]),
    ("<input placeholder=Search type=text>", ["Search"]),
    ('<i data-title="x" TITLE = "Hi there" aria-label="Close">', ["Hi there", "Close"]),
    ('<a href="x" title="12">', []),  # no letter
    ('<img alt="">', []),
    ('<b translate="no" title="Keep">', []),  # the element is not to be translated
    ("<b class='x notranslate' title=Keep>", []),
    ('<span translate="no" title="x">y</span>', []),  # a hidden element, kept whole
    ('<!-- <img alt="x"> -->', []),
    ("</b>", []),
    ('<img alt="a title=&quot;b&quot;" src="t">', ['a title="b"']),
)


@pytest.mark.parametrize(("tag", "values"), FIND_CASES)
def test_find_values(tag, values):
    found = at.find_values(tf.constant([tag]))
    assert [v.decode() for v in found.values.numpy()] == values


class _Attributes(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.attrs = []

    def handle_starttag(self, tag, attrs):
        self.attrs.append(attrs)

    handle_startendtag = handle_starttag


def _read(tag):
    parser = _Attributes()
    parser.feed(tag)
    parser.close()
    return parser.attrs[0]


_VALUES = ("Open the file", 'It\'s "here"', "a & b < c", "x", "Tom's <b>bold</b>", "5")


def _tag(rng):
    names = ("alt", "title", "src", "placeholder", "data-alt", "Aria-Label", "class", "label")
    parts = [("img", "a", "input", "option")[rng.integers(4)]]
    for name in rng.choice(names, rng.integers(0, 5), replace=False):
        value = _VALUES[rng.integers(len(_VALUES))]
        escaped = value.replace("&", "&amp;").replace("<", "&lt;")
        quote = ('"', "'", "")[rng.integers(3)]
        if quote == "" and any(c in value for c in " \"'<>=`"):
            quote = '"'
        if quote:
            escaped = escaped.replace(quote, "&quot;" if quote == '"' else "&#39;")
        parts.append(f"{name}{' = ' if rng.random() < 0.2 else '='}{quote}{escaped}{quote}")
    return f"<{' '.join(parts)}{' /' if rng.random() < 0.3 else ''}>"


@pytest.mark.parametrize("seed", range(3))
def test_values_written_back_read_as_html_parser_reads_them(seed):
    # The reference: html.parser's attributes of the rebuilt tag are the original ones, with
    # each translatable value (with a letter) replaced by its "translation".
    rng = np.random.default_rng(seed)
    tags = [_tag(rng) for _ in range(60)]
    found = graph_function(at.find_values)(tf.constant(tags))
    translations = tf.strings.join(["«", tf.strings.upper(found.values), " & 'ü'»"])
    rebuilt = at.put_values(found, translations).numpy()
    changed = 0
    for tag, new in zip(tags, rebuilt):
        want = []
        for name, value in _read(tag):
            if name in at.ATTRIBUTES and any(c.isalpha() for c in value):
                value, changed = f"«{value.upper()} & 'ü'»", changed + 1
            want.append((name, value))
        assert _read(new.decode()) == want, (tag, new)
    assert changed == found.values.shape[0] > 30
