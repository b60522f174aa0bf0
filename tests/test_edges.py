"""Punctuation at elements' edges (`data/edges.py`): the source's counts against a Python
reference (`unicodedata`, `html.unescape`), hand-aligned translations with the expected
output, and random alignments whose elements, holding no punctuation at their edges in the
source, come back without punctuation at theirs (and well-formed, same tags, same text)."""

import html
import re
import unicodedata
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data import markup as mk
from keras_transformer.tracing import graph_function


def _punct(char):
    return unicodedata.category(char).startswith("P")


def _run(text, reverse=False):
    """The punctuation characters `text` begins with (ends with, `reverse`)."""
    count = 0
    for char in reversed(text) if reverse else text:
        if not _punct(char):
            break
        count += 1
    return count


def reference_edges(source):
    """Python's reading of the rule: per tag, the punctuation its element's text begins with
    (opening tags) or ends with (closing), tags inside skipped, a break or a tag that encloses
    nothing ending the count; -1 on those."""
    parts = re.split(f"({mk.TAG})", source)
    stops = [i % 2 == 1 and (re.fullmatch(mk.BREAK_TAG, p) is not None or p.endswith("/>"))
             for i, p in enumerate(parts)]  # fmt: skip
    found = []
    for i in range(1, len(parts), 2):
        if stops[i]:
            found.append(-1)
            continue
        closing = parts[i].startswith("</")
        order = range(i - 1, -1, -1) if closing else range(i + 1, len(parts))
        count = 0
        for j in order:
            if j % 2:
                if stops[j]:
                    break
                continue
            text = html.unescape(parts[j])
            run = _run(text, reverse=closing)
            count += run
            if run < len(text):
                break
        found.append(count)
    return found


PUNCT = ["", "", ".", ",", "...", "!?", ")", "(", "\u201e", "\u201c", "\u00bb", "\u2013", ";"]
WORDS = ["Open", "file", "x", "f(x)", "Zeile", "caf&eacute;", "a&amp;b", "&quot;q&quot;"]


def _random_source(rng):
    out = []
    for _ in range(rng.integers(2, 7)):
        pre, post = (PUNCT[i] for i in rng.integers(len(PUNCT), size=2))
        core = WORDS[rng.integers(len(WORDS))]
        kind = rng.integers(5)
        if kind == 0:  # an element around the word's letters, punctuation outside
            out.append(f"{pre}<b>{core}</b>{post}")
        elif kind == 1:
            out.append(f"<i>{pre}{core}{post}</i>")
        elif kind == 2:
            out.append(f'<a href="h">{pre}{core} {WORDS[rng.integers(len(WORDS))]}.</a>{post}')
        else:
            out.append(pre + core + post + ("<br/>" if kind == 3 else ""))
    source = " ".join(out)
    return f"<span>{source}</span>" if rng.integers(2) else source


@pytest.mark.parametrize("seed", range(4))
def test_edge_counts_match_python(seed):
    rng = np.random.default_rng(seed)
    sources = [_random_source(rng) for _ in range(40)]
    parsed = mk.parse_markup(tf.constant(sources))
    assert not any(parsed.warnings.numpy())
    for source, got in zip(sources, parsed.edge.to_list()):
        assert got == reference_edges(source), source


CASES = (
    # source, translation, links (source word of each output word), expected
    ("Open the <a href='x'>file</a>.", "Öffnen Sie die Datei.", [0, 0, 1, 2],
     "Öffnen Sie die <a href='x'>Datei</a>."),
    ("'<code>Darwin</code>', <code>Linux</code>.", "'Darwin', Linux.", [0, 1],
     "'<code>Darwin</code>', <code>Linux</code>."),
    ("(<b>see</b>)", "(siehe)", [0], "(<b>siehe</b>)"),
    ("<b>f(x)</b>.", "f(x).", [0], "<b>f(x)</b>."),
    ("Choose <b>Tools - Options...</b>", "Wählen Sie Extras - Optionen...", [0, 0, 1, 2, 3],
     "Wählen Sie <b>Extras - Optionen...</b>"),
    ('<b>"Open"</b> it', "\u201eÖffnen\u201c es", [0, 1], "<b>\u201eÖffnen\u201c</b> es"),
    # nested: the inner element ends before the dot, the outer after it
    ("<a><b>x</b>.</a>", "y.", [0], "<a><b>y</b>.</a>"),
    ("<a><b>x</b></a>.", "y.", [0], "<a><b>y</b></a>."),
    # a line or block element holds its punctuation; an inline one inside it does not
    ("<p><b>Open</b></p>", "Öffnen.", [0], "<p><b>Öffnen</b>.</p>"),
    ("<li>Open</li>\n<li>Close</li>", "Öffnen. Schließen.", [0, 1],
     "<li>Öffnen.</li>\n<li>Schließen.</li>"),
    # a word of punctuation only stays whole (French spacing; an element keeps its words)
    ("<b>Open file</b>!", "Ouvrir le fichier !", [0, 0, 1, 1], "<b>Ouvrir le fichier !</b>"),
    ("<b>x</b>", "\u2014", [0], "<b>\u2014</b>"),
    # escaped characters around a moved tag
    ("<b>a &lt; b</b>&amp;.", "a < b&.", [0, 1, 2], "<b>a &lt; b</b>&amp;."),
    # an element placed with no words of its own stands before the punctuation too
    ("<i>x <b>y</b></i>", "X.", [0], "<i>X<b></b></i>."),
)  # fmt: skip


@pytest.mark.parametrize(("source", "translation", "links", "expected"), CASES)
def test_edge_case(source, translation, links, expected):
    parsed = mk.parse_markup(tf.constant([source]))
    got = mk.insert_tags(parsed, [translation], tf.constant([links], tf.int32))
    assert got[0].numpy().decode() == expected


def _element_texts(text):
    root = ET.fromstring(f"<root>{text}</root>")
    return ["".join(e.itertext()) for e in list(root.iter())[1:] if e.tag not in ("br",)]


@pytest.mark.parametrize("seed", range(3))
def test_random_alignments_keep_edge_punctuation_outside(seed):
    rng = np.random.default_rng(seed)
    sources, translations, links = [], [], []
    for _ in range(30):
        words = [["Open", "file", "x", "Zeile"][rng.integers(4)] for _ in range(6)]
        for _ in range(rng.integers(1, 4)):  # inline elements, no punctuation in the source
            first = int(rng.integers(len(words)))
            last = int(rng.integers(first, len(words)))
            name = ["b", "i", "a"][rng.integers(3)]
            words[first] = f"<{name}>" + words[first]
            words[last] += f"</{name}>"
        source = " ".join(words)
        try:
            ET.fromstring(f"<root>{source}</root>")
        except ET.ParseError:
            continue  # crossing elements: translated as text
        sources.append(source)
        out = [PUNCT[rng.integers(len(PUNCT))] + ["Wort", "Satz", "z"][rng.integers(3)]
               + PUNCT[rng.integers(len(PUNCT))] for _ in range(rng.integers(1, 9))]  # fmt: skip
        out += ["!"] * int(rng.integers(2))  # a word of punctuation only
        translations.append(" ".join(out))
        links.append(rng.integers(-1, 6, size=len(out)))
    insert = graph_function(mk.insert_tags)
    parsed = graph_function(mk.parse_markup)(tf.constant(sources))
    got = insert(parsed, translations, tf.ragged.constant(links).to_tensor(-1))
    for source, translation, result in zip(sources, translations, got.numpy()):
        result = result.decode()
        assert re.findall(mk.TAG, result) == re.findall(mk.TAG, source)
        assert re.sub(mk.TAG, "", result) == translation
        for text in _element_texts(result):
            words = text.split()
            if words and any(not _punct(c) for c in words[0]):
                assert not _punct(words[0][0]) or text[0].isspace(), (source, result)
            if words and any(not _punct(c) for c in words[-1]):
                assert not _punct(words[-1][-1]) or text[-1].isspace(), (source, result)


def test_inputs_without_tags_and_with_tags_in_one_batch():
    sources = ["The cat sleeps.", "<b>Open</b>.", ""]
    parsed = graph_function(mk.parse_markup)(tf.constant(sources))
    links = tf.constant([[0, 1, 2], [0, -1, -1], [-1, -1, -1]], tf.int32)
    got = graph_function(mk.insert_tags)(parsed, ["Die Katze schläft.", "Öffnen.", ""], links)
    assert got.numpy().tolist() == [b"Die Katze schl\xc3\xa4ft.", b"<b>\xc3\x96ffnen</b>.", b""]
    alone = mk.insert_tags(mk.parse_markup(tf.constant(sources[:1])), ["Die Katze schläft."],
                           tf.constant([[0, 1, 2]], tf.int32))  # fmt: skip
    assert alone.numpy().tolist() == [b"Die Katze schl\xc3\xa4ft."]
