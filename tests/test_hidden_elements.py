"""Elements the model never reads (`data/markup.py`, `hide_elements`): comments, `<script>`
and `<style>` (HTML's raw text elements), and elements marked `translate="no"` or with the
`notranslate` class come back byte for byte, whatever they hold. The reference is Python's
`html.parser` (which reads scripts and styles as raw text) on random pages, and the pages'
own construction (which substrings are hidden)."""

from html.parser import HTMLParser

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data import markup as mk
from keras_transformer.tracing import graph_function


def _parse(text):
    parsed = mk.parse_markup(tf.constant([text]))
    return (
        parsed.text[0].numpy().decode(),
        [t.decode() for t in parsed.tags[0].numpy()],
        parsed.spaced[0].numpy().tolist(),
        parsed.warnings[0].numpy().decode(),
    )


PARSE_CASES = (
    ("script with markup and a less-than", 'Run <script>if (a<b) f("<p>");</script>it.',
     "Run it.", ['<script>if (a<b) f("<p>");</script>'], [0]),
    ("style, any case", "Hi<STYLE type='text/css'>p>b{x:1}</style> there", "Hi there",
     ["<STYLE type='text/css'>p>b{x:1}</style>"], [0]),
    ("translate=no with nested tags", 'Click <span translate="no">Acme <b>Cloud</b></span> now',
     "Click  now", ['<span translate="no">Acme <b>Cloud</b></span>'], [3]),
    ("notranslate class among others, nested same name",
     "<div class='box notranslate'>a <div>b</div></div> c", "c",
     ["<div class='box notranslate'>a <div>b</div></div> "], [2]),
    ("unquoted, upper case, hidden inside hidden",
     "x <code TRANSLATE=NO>ls <i translate=no>-l</i></code> y",
     "x  y", ["<code TRANSLATE=NO>ls <i translate=no>-l</i></code>"], [3]),
    ("a comment's inside is not parsed", "Open <!--x<p>y <b>--> the file", "Open  the file",
     ["<!--x<p>y <b>-->"], [0]),
    ("declarations, instructions, CDATA",
     '<!DOCTYPE html><?xml version="1.0"?>Open <![CDATA[a<b]]>', "Open",
     ["<!DOCTYPE html>", '<?xml version="1.0"?>', " <![CDATA[a<b]]>"], [0, 0, 0]),
    ("other attributes do not hide", '<i class="notranslated" data-translate="no">y</i> z',
     "y z", ['<i class="notranslated" data-translate="no">', "</i>"], [0, 0]),
    ("translate=yes translates", '<b translate="yes">y</b>', "y",
     ['<b translate="yes">', "</b>"], [0, 0]),
    ("a hidden block between words separates them", 'end.<p translate="no">x</p>Next',
     "end. Next", ['<p translate="no">x</p>'], [0]),
)  # fmt: skip


@pytest.mark.parametrize(("case", "text", "plain", "tags", "spaced"), PARSE_CASES)
def test_parse_case(case, text, plain, tags, spaced):
    assert _parse(text) == (plain, tags, spaced, ""), case


@pytest.mark.parametrize(
    "text", ['<b translate="no">unclosed', "<script>never closed", '<i translate="no">a</b>']
)
def test_malformed_hidden_elements_are_text_with_a_warning(text):
    assert _parse(text) == (text, [], [], mk.MALFORMED)


INSERT_CASES = (
    # source, translation, links (source word of each output word), expected
    ('Click <span translate="no">Acme Cloud</span> to start.', "Klicken Sie zum Starten.",
     [0, 0, 2, 3], 'Klicken Sie <span translate="no">Acme Cloud</span> zum Starten.'),
    ('Use <code translate="no">ls -l</code>', "Benutze es", [0, 0],
     'Benutze es <code translate="no">ls -l</code>'),
    ("<b class='notranslate'>Acme</b> is great", "Acme ist toll", [1, 1, 2],
     "<b class='notranslate'>Acme</b> Acme ist toll"),
    ("Run <script>a<b</script>it", "Führe es aus", [0, 1, 1],
     "Führe <script>a<b</script>es aus"),
    ('Ze<i translate="no">ll</i>en', "Zellen", [0], 'Zellen<i translate="no">ll</i>'),
)  # fmt: skip


@pytest.mark.parametrize(("source", "translation", "links", "expected"), INSERT_CASES)
def test_insert_case(source, translation, links, expected):
    parsed = mk.parse_markup(tf.constant([source]))
    got = mk.insert_tags(parsed, [translation], tf.constant([links], tf.int32))
    assert got[0].numpy().decode() == expected


class _Reader(HTMLParser):
    """Python's HTML parser: the visible words outside hidden elements, and every markup
    event (tags, comments, raw text), as the reference."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.words, self.events, self.stack, self.hidden = [], [], [], 0

    def handle_starttag(self, tag, attrs):
        attrs = {k: (v or "") for k, v in attrs}
        hide = (
            attrs.get("translate", "").strip().lower() == "no"
            or "notranslate" in attrs.get("class", "").split()
        )
        self.stack.append(hide)
        self.hidden += hide
        self.events.append(self.get_starttag_text())
        if tag in mk.BREAKS:
            self.words.append(" ")

    def handle_endtag(self, tag):
        self.hidden -= self.stack.pop()
        self.events.append(f"</{tag}>")

    def handle_comment(self, data):
        self.events.append(f"<!--{data}-->")

    def handle_decl(self, decl):
        self.events.append(f"<!{decl}>")

    def handle_pi(self, data):
        self.events.append(f"<?{data}>")

    def unknown_decl(self, data):
        self.events.append(f"<![{data}]>")

    def handle_data(self, data):
        if self.lasttag in ("script", "style") and self.cdata_elem:
            self.events.append(data)
        elif not self.hidden:
            self.words.append(data)


def _read(text):
    reader = _Reader()
    reader.feed(text)
    reader.close()
    return "".join(reader.words).split(), reader.events


_WORDS = ("the", "file", "Acme", "a&amp;b", "x<y", "OK.")


def _page(rng, depth=0):
    """A random page of words and elements: `(html, hidden)`, the hidden substrings."""
    parts, hidden = [], []
    for _ in range(rng.integers(1, 5)):
        choice = rng.integers(8) if depth < 3 else 0
        if choice <= 2:
            parts.append(str(_WORDS[rng.integers(len(_WORDS))]).replace("<", "&lt;"))
        elif choice == 3:
            opaque = ("<!-- note <b>{} -->", "<![CDATA[x<{}]]>", "<?php {} ?>", "<!DOCTYPE {}>")
            parts.append(opaque[rng.integers(4)].format(rng.integers(9)))
            hidden.append(parts[-1])
        elif choice == 4:
            name = ("script", "style")[rng.integers(2)]
            parts.append(f'<{name}>if (a<b) x = "</p><i>";</{name}>')
            hidden.append(parts[-1])
        else:
            name = ("span", "b", "p", "div")[rng.integers(4)]
            inner, inner_hidden = _page(rng, depth + 1)
            mark = ("", ' translate="no"', " class='k notranslate'")[rng.integers(3)]
            parts.append(f"<{name}{mark}>{inner}</{name}>")
            hidden.extend([parts[-1]] if mark else inner_hidden)
    return " ".join(parts), hidden


@pytest.mark.parametrize("seed", range(3))
def test_random_pages_hide_what_html_parser_hides(seed):
    rng = np.random.default_rng(seed)
    pages = [_page(rng) for _ in range(40)]
    texts = [p for p, _ in pages]
    parsed = graph_function(mk.parse_markup)(tf.constant(texts))
    assert not any(parsed.warnings.numpy())
    for text, model_text in zip(texts, parsed.text.numpy()):
        assert model_text.decode().split() == _read(text)[0]
    translations = [" ".join(f"w{i}" for i in range(n)) for n in rng.integers(0, 6, len(texts))]
    links = [rng.integers(-1, max(len(t.split()), 1), len(tr.split()))
             for t, tr in zip(parsed.text.numpy(), translations)]  # fmt: skip
    out = mk.insert_tags(parsed, translations, tf.ragged.constant(links, tf.int32).to_tensor(-1))
    for (text, hidden), translation, result in zip(pages, translations, out.numpy()):
        result = result.decode()
        words, events = _read(result)
        assert words == translation.split()
        assert events == _read(text)[1]  # the same tags, comments and code, in order
        for element in hidden:
            assert result.count(element) >= text.count(element)
    assert sum(len(h) for _, h in pages) > 40  # the pages hide things


_LAYOUT_PAGES = (
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n  <title>Open a file</title>\n'
    '  <script>if (a<b) show("<p>");</script>\n</head>\n<body>\n<p>Choose <b>File - Open.</b>\n'
    'Then click <a href="ok.html">OK.</a></p>\n<p translate="no">Keras 2.0</p>\n</body>\n</html>\n',
    "<ul>\n  <li><a href='a'>One</a></li>\n  <li>Two <b>three</b></li>\n</ul>",
    "\n\n<div>\n\t<p>Lines <i>and</i> tabs</p>\n</div>\n<!-- end -->\n",
)


@pytest.mark.parametrize("page", _LAYOUT_PAGES)
def test_a_page_translated_word_for_word_comes_back_byte_for_byte(page):
    # The reference is the page itself: with each output word its own source word, the line
    # breaks and indentation between tags come back where they were, no space added.
    parsed = mk.parse_markup(tf.constant([page]))
    text = parsed.text[0].numpy().decode()
    assert text == text.strip() and "\n" not in text.replace(".\n", ". ")  # no layout left
    links = tf.constant([np.arange(len(text.split()))], tf.int32)
    assert mk.insert_tags(parsed, [text], links)[0].numpy().decode() == page
