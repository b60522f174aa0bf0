"""Protected spans (`data/protected_spans.py`): a case per pattern of the table, and the
placement of missing spans by hand-written alignments against the expected sentences."""

import pytest
import tensorflow as tf

from keras_transformer.data import protected_spans as ps
from keras_transformer.testing.span_cases import SPAN_CASES


def _spans(text):
    words = ps.protected_words(tf.constant([text]))[0].numpy().tolist()
    return [w.decode() for w in words if w]


@pytest.mark.parametrize(("pattern", "text", "expected"), SPAN_CASES)
def test_table_case(pattern, text, expected):
    assert _spans(text) == expected


def test_every_pattern_has_a_case():
    assert {p.name for p in ps.PATTERNS} <= {case[0] for case in SPAN_CASES}


def test_each_case_is_its_patterns():
    for name, text, expected in SPAN_CASES:
        alone = [p for p in ps.PATTERNS if p.name == name]
        assert [w.decode() for w in ps.protected_words([text], alone)[0].numpy() if w] == (
            expected
        ), name


def test_plain_words_hold_no_span():
    text = "Choose Format - Cells, then OK; 50% is a < b and {not valid."
    assert _spans(text) == ["50"]


def test_restore_keeps_copies_replaces_and_inserts():
    sources = [
        "Open https://example.com/help and press Ctrl+Shift+F5 to refresh 3 cells.",
        "Saved %s files.",
        "No spans here.",
    ]
    translations = [
        "Öffnen Sie https://exp.com/d und drücken Sie Strg+Umschalt+F5 Zellen.",
        "Dateien gespeichert.",
        "Keine  Spannen.",
    ]
    links = tf.constant(
        [[0, 0, 1, 2, 3, 3, 4, 8], [2, 0, -1, -1, -1, -1, -1, -1], [0, 1, 2, -1, -1, -1, -1, -1]]
    )
    out = ps.restore_spans(sources, translations, links).numpy().tolist()
    assert out == [
        "Öffnen Sie https://example.com/help und drücken Sie Ctrl+Shift+F5 3 Zellen.".encode(),
        b"Dateien gespeichert. %s",  # aligned to nothing: after "Saved"'s word
        b"Keine  Spannen.",  # untouched, spacing kept
    ]


def test_restore_does_not_repeat_a_copied_span():
    out = ps.restore_spans(["Cell 12 and 7."], ["Zelle 12 und 8."], [[0, 1, 2, 3]])
    assert out.numpy().tolist() == [b"Zelle 12 und 7."]


def test_many_placeholders_in_bounded_time():
    text = " ".join(f"{{{i}}}" for i in range(10_000))
    spans = ps.protected_words([text]).flat_values
    assert int(tf.reduce_sum(tf.cast(spans != "", tf.int32))) == 10_000
    out = ps.restore_spans([text], [""], tf.zeros([1, 0], tf.int32))
    assert out.numpy()[0].decode().split() == text.split()
