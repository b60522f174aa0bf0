"""Tests for keras_transformer.data.segmenter: the rule table case by case (eagerly and in a
traced function), every rule covered by a case, the exact round trip of any input through
segments and separators, and hostile inputs."""

from __future__ import annotations

import pytest
import tensorflow as tf

from keras_transformer.data.segmenter import RULES, Rule, decide_gaps, segment, split_sentences
from keras_transformer.testing.segmenter_cases import SEGMENTER_CASES
from keras_transformer.tracing import graph_function

SPEC = tf.TensorSpec([None], tf.string)


@pytest.mark.parametrize(("rule", "text", "expected"), SEGMENTER_CASES)
def test_table_case_eager(rule, text, expected):
    assert split_sentences(text) == expected, rule


def test_table_cases_traced_in_one_batch():
    texts = tf.constant([text for _, text, _ in SEGMENTER_CASES])
    traced = graph_function(lambda t: segment(t).segments.to_tensor(""), input_signature=[SPEC])
    got = traced(texts).numpy()
    for row, (rule, _, expected) in zip(got, SEGMENTER_CASES):
        segments = [s.decode() for s in row[: len(expected)]]
        assert segments == expected and not any(row[len(expected) :]), rule


def test_every_rule_has_a_case():
    assert {rule.name for rule in RULES} == {rule for rule, _, _ in SEGMENTER_CASES}


def test_each_rule_decides_its_case_first():
    """Remove a rule and its cases change: each rule does work that no later rule does."""
    for rule in RULES:
        rest = tuple(r for r in RULES if r is not rule)
        texts = [text for name, text, _ in SEGMENTER_CASES if name == rule.name]
        with_rule = segment(tf.constant(texts)).segments.to_list()
        without = segment(tf.constant(texts), rest).segments.to_list()
        assert with_rule != without, rule.name


def test_first_matching_rule_wins():
    words = tf.constant(["end."]), tf.constant([" "]), tf.constant(["Next"])
    split_first = (Rule("a", True, before=r".*\."), Rule("b", False))
    keep_first = (Rule("b", False, after="Next"), Rule("a", True, before=r".*\."))
    assert decide_gaps(*words, rules=split_first).numpy().tolist() == [True]
    assert decide_gaps(*words, rules=keep_first).numpy().tolist() == [False]
    assert decide_gaps(*words, rules=()).numpy().tolist() == [False]  # no rule: no split


ROUND_TRIP = [
    "",
    " ",
    "\n",
    "One.",
    "  Lead. And trail.  \n",
    "Para one. Still one.\n\nPara two.\r\n\tIndented line.",
    "Tabs\tand  double  spaces. Kept exactly.",
    "Unicode\u3000space. And\u2028line separator. And no\u00a0break. Fine.",
    "x\x1fy. Marker.",  # the internal marker byte reads as a space
    "...!?",
    "😀 ça va? Très bien.",
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_segments_and_separators_rebuild_the_input(text):
    seg = segment(tf.constant([text]))
    segments, separators = seg.segments[0].numpy(), seg.separators[0].numpy()
    assert len(separators) == len(segments) - 1
    rebuilt = segments[0] + b"".join(s + t for s, t in zip(separators, segments[1:]))
    assert rebuilt == text.replace("\x1f", " ").encode()
    assert seg.join(seg.segments.flat_values).numpy()[0] == rebuilt
    for part in separators:  # separators are whitespace only; segments have none at the edges
        assert part.decode().strip() == "" and part
    for part in segments:
        assert part.decode() == part.decode().strip(" \t\n\r\u3000\u2028")


def test_hostile_inputs_segment_without_error():
    texts = [b"", b"   ", b"...", b"\xff\xfe caf\xc3 \x80. Ok", b"word " * 20_000, b"a." * 5000]
    seg = segment(tf.constant(texts))
    assert seg.segments.nrows() == len(texts)
    assert seg.segments[0].numpy().tolist() == [b""]
    assert seg.segments[1].numpy().tolist() == [b"", b""]
    # Bytes that are not UTF-8 match no pattern: that word ends no sentence, nothing fails.
    assert seg.segments[3].numpy().tolist() == [b"\xff\xfe caf\xc3 \x80. Ok"]
    assert seg.segments[4].numpy().tolist() == [b"word " * 19_999 + b"word", b""]
    assert seg.segments[5].numpy().tolist() == [b"a." * 5000]  # no whitespace, no gap


def test_join_keeps_n_best_columns():
    seg = segment(tf.constant(["Aa. Bb.", "Cc."]))
    translations = tf.constant([["a1", "a2"], ["b1", "b2"], ["c1", "c2"]])
    joined = seg.join(translations).numpy().tolist()
    assert joined == [[b"a1 b1", b"a2 b2"], [b"c1", b"c2"]]
