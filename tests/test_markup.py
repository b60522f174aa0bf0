"""Inline markup (`data/markup.py`): parsing rules on hand-written cases, tags put back
around hand-aligned words (nested, self-closing, around the whole sentence, a word that moves
in German word order), well-formedness and equal tags checked by Python's XML parser on
random alignments, malformed and hostile markup."""

import html
import re
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data import markup as mk
from keras_transformer.data.covers import covers
from keras_transformer.tracing import graph_function


def _parse(text):
    parsed = mk.parse_markup(tf.constant([text]))
    return {
        "text": parsed.text[0].numpy().decode(),
        "tags": [t.decode() for t in parsed.tags[0].numpy()],
        "first": parsed.first[0].numpy().tolist(),
        "last": parsed.last[0].numpy().tolist(),
        "warning": parsed.warnings[0].numpy().decode(),
    }


PARSE_CASES = (
    ("paired", "Click <b>OK</b> now.", "Click OK now.", ["<b>", "</b>"], [1, None], [1, None]),
    (
        "attributes kept verbatim",
        "See <a href=\"x.html#a\" class='k'>the help page</a>.",
        "See the help page.",
        ["<a href=\"x.html#a\" class='k'>", "</a>"], [1, None], [3, None],
    ),
    (
        "nested",
        "<p>Choose <span class=\"emph\">Format - <b>Cells</b></span></p>",
        "Choose Format - Cells",
        ["<p>", '<span class="emph">', "<b>", "</b>", "</span>", "</p>"],
        [0, 1, 3, None, None, None], [3, 3, 3, None, None, None],
    ),
    ("self-closing", 'Press <x id="1"/> then <br/>', "Press  then", ['<x id="1"/>', " <br/>"],
     [1, 2], [0, 1]),
    ("entities", "a &lt; b &amp; <b>c</b>", "a < b & c", ["<b>", "</b>"], [4, None], [4, None]),
    ("stray less-than", "a < b and c > d", "a < b and c > d", [], [], []),
    ("inside a word", "Ze<b>ll</b>en", "Zellen", ["<b>", "</b>"], [0, None], [0, None]),
    # HTML's void elements and comments enclose nothing, as <br/> does (no warning); a tag
    # that encloses nothing stands after the word it follows directly; a line break between
    # two words separates them.
    ("void elements", 'Line<br>two <IMG src="a.png" alt="x"> <b>end</b><hr>',
     "Line two  end", ["<br>", '<IMG src="a.png" alt="x">', "<b>", "</b>", "<hr>"],
     [1, 2, 2, None, 3], [0, 1, 2, None, 2]),
    ("comment", "Open <!-- a <b> note -->the <b>file</b>.", "Open the file.",
     ["<!-- a <b> note -->", "<b>", "</b>"], [1, 2, None], [0, 2, None]),
    ("blocks", "end.<p>Next one</p><hr>", "end. Next one", ["<p>", "</p>", "<hr>"],
     [1, None, 3], [2, None, 2]),
    # names pair without case, as HTML reads them
    ("names without case", '<A HREF="x">Click <B>OK</b></a> now.', "Click OK now.",
     ['<A HREF="x">', "<B>", "</b>", "</a>"], [0, 1, None, None], [1, 1, None, None]),
    # a void element's name opens an element where the input closes one (XML's <link>)
    ("void name closed", 'Call the <link href="x.xhp">Table Wizard</link> <br>now.',
     "Call the Table Wizard now.", ['<link href="x.xhp">', "</link>", "<br>"], [2, None, 4],
     [3, None, 3]),
    ("void name not closed", 'A <link rel="s"> and <img src="i"> here', "A  and  here",
     ['<link rel="s">', '<img src="i">'], [1, 2], [0, 1]),
    # (a no-break space parts two words, as SentencePiece reads it: "x" is word 4)
    ("references", "5&nbsp;&euro; &#8211; caf&#xE9; <b>x</b>", "5\u00a0\u20ac \u2013 caf\u00e9 x",
     ["<b>", "</b>"], [4, None], [4, None]),
    # an element with no text inside encloses nothing, glued to a word or not
    ("empty element", 'Open it.<a id="e"></a> Now <b> </b>', "Open it. Now",
     ['<a id="e">', "</a>", " <b> ", "</b>"], [2, None, 3, None], [1, None, 2, None]),
)  # fmt: skip


@pytest.mark.parametrize(
    "space", ["\u00a0", "&nbsp;", "&#160;", "&#xA0;", "&#x000a0;", "\u202f", "&#8239;", "&thinsp;",
              "\u3000", "&ensp;", "\u200c", "&zwnj;"]
)  # fmt: skip
def test_no_break_and_unicode_spaces_part_words_as_the_model_reads_them(space):
    """A space SentencePiece reads as a word boundary, written or as a reference, parts two
    words where tags are counted (as a plain space does), and the invisible characters of a
    word of them alone make no word; the text keeps the space it was given."""
    plain = _parse("Press <b>OK</b> to <i>close</i> it.")
    got = _parse(f"Press{space}<b>OK</b> to{space}<i>close</i> \u200b &shy; it.")
    assert (got["first"], got["last"]) == (plain["first"], plain["last"])
    assert (plain["first"][0::2], plain["last"][0::2]) == ([1, 3], [1, 3])  # "OK", "close"
    assert got["tags"] == plain["tags"] and got["warning"] == ""
    assert got["text"].startswith("Press" + html.unescape(space) + "OK to")  # kept as given


@pytest.mark.parametrize(("case", "text", "plain", "tags", "first", "last"), PARSE_CASES)
def test_parse_case(case, text, plain, tags, first, last):
    got = _parse(text)
    assert (got["text"], got["tags"], got["warning"]) == (plain, tags, "")
    for i, (low, high) in enumerate(zip(first, last)):
        if low is not None:
            assert (got["first"][i], got["last"][i]) == (low, high), (case, i)


@pytest.mark.parametrize(
    "text", ["<b>unclosed", "<b>crossing <i>tags</b></i>", "stray</b> close", "<b>x</i>"]
)
def test_malformed_markup_is_text_with_a_warning(text):
    got = _parse(text)
    assert (got["text"], got["tags"], got["warning"]) == (text, [], mk.MALFORMED)


INSERT_CASES = (
    # source, translation, links (source word of each output word), expected
    ("Click <b>OK</b> now.", "Klicken Sie jetzt auf OK.", [0, 0, 2, 1, 1],
     "Klicken Sie jetzt <b>auf OK</b>."),
    ("<p>All of it.</p>", "Alles davon.", [0, 2], "<p>Alles davon.</p>"),
    ("The document will be <b>printed</b> in black.", "Das Dokument wird in Schwarz gedruckt.",
     [0, 1, 2, 5, 6, 4], "Das Dokument wird in Schwarz <b>gedruckt</b>."),
    ("<p>Choose <span class=\"emph\">Format - <b>Cells</b></span> now</p>",
     "Wählen Sie jetzt Format - Zellen", [0, 0, 4, 1, 2, 3],
     "<p>Wählen Sie jetzt <span class=\"emph\">Format - <b>Zellen</b></span></p>"),
    ('Press <x id="1"/> then Enter', "Drücken Sie dann Enter", [0, 0, 1, 2],
     'Drücken Sie <x id="1"/>dann Enter'),
    ("a &lt; <b>b</b>", "a < b", [0, 1, 2], "a &lt; <b>b</b>"),
    ("<b>x</b> y", "", [], "<b></b>"),
    ("Open <!-- keep me -->the file.<br>Now", "Öffnen Sie die Datei. Jetzt", [0, 0, 1, 2, 3],
     "Öffnen Sie <!-- keep me -->die Datei. <br>Jetzt"),
    ("Caf&eacute; &amp; <b>Tee</b>", "Café & Tee", [0, 1, 2], "Café &amp; <b>Tee</b>"),
    # whitespace between a tag and the text's first or last word stays on its side of the tag
    ('<img src="a.png"> The cat sleeps.', "Die Katze schläft.", [0, 1, 2],
     '<img src="a.png"> Die Katze schläft.'),
    ("<p>\n  Open it.\n</p>", "Öffne es.", [0, 1], "<p>\n  Öffne es.\n</p>"),
    ('Open it. <img src="b.png">', "Öffne es.", [0, 1], 'Öffne es. <img src="b.png">'),
    ('Open it. <span id="x"></span>', "Öffne es.", [0, 1], 'Öffne es. <span id="x"></span>'),
    ('Open it.<a id="e"></a>', "Öffne es.", [0, 1], 'Öffne es.<a id="e"></a>'),
    ('Open<a id="e"></a> it.', "Öffne es.", [0, 1], 'Öffne <a id="e"></a>es.'),
    # the space a line break stands for between words is the model's, not the page's
    ("<p>Next one</p><hr>", "Nächste eins", [0, 1], "<p>Nächste eins</p><hr>"),
)  # fmt: skip


@pytest.mark.parametrize(("source", "translation", "links", "expected"), INSERT_CASES)
def test_insert_case(source, translation, links, expected):
    parsed = mk.parse_markup(tf.constant([source]))
    links = tf.constant([links], tf.int32) if links else tf.zeros([1, 0], tf.int32)
    assert mk.insert_tags(parsed, [translation], links)[0].numpy().decode() == expected


def _tag_skeleton(text):
    return re.findall(mk.TAG, text)


@pytest.mark.parametrize("seed", range(3))
def test_random_alignments_keep_tags_well_formed_and_equal(seed):
    rng = np.random.default_rng(seed)
    sources = [
        '<p>Choose <span class="emph">Format - <b>Cells</b></span> and <i>click</i> OK.</p>',
        "<b>One</b> <i>two</i> <u>three</u> four <x/> five",
        "<a href='h'>Open <b>the</b> file</a> and <b>save <i>it</i></b> now",
    ]
    translations = ["Eins zwei drei vier fünf sechs", "a b", "x y z w v u t s r"]
    parsed = mk.parse_markup(tf.constant(sources))
    words = [len(s.split()) for s in parsed.text.numpy()]
    links = [rng.integers(-1, n, size=len(t.split())) for n, t in zip(words, translations)]
    out = mk.insert_tags(parsed, translations, tf.ragged.constant(links).to_tensor(-1))
    for source, translation, result in zip(sources, translations, out.numpy()):
        result = result.decode()
        ET.fromstring(f"<root>{result}</root>")  # well-formed XML
        assert _tag_skeleton(result) == _tag_skeleton(source)  # same tags, same order
        assert re.sub(mk.TAG, "", result).split() == translation.split()


def test_hostile_markup_is_answered_in_bounded_time():
    nested = "<b>" * 10_000 + "x" + "</b>" * 10_000
    huge = '<span title="' + "a" * 50_000 + '">x</span> y'
    deepest = "<i>" * (mk.MAX_TAGS // 2) + "x" + "</i>" * (mk.MAX_TAGS // 2)  # at the limit
    parse, insert = graph_function(mk.parse_markup), graph_function(mk.insert_tags)
    links = tf.constant([[0, 0], [0, 1], [0, -1]])
    insert(parse(tf.constant(["<b>a</b>", "b", "c"])), tf.constant(["A", "B", "C"]), links)
    start = time.perf_counter()  # traced above (the export traces once): a request's time
    parsed = parse(tf.constant([nested, huge, deepest]))
    out = insert(parsed, tf.constant(["x", "X Y", "X"]), links)
    assert time.perf_counter() - start < 20
    assert parsed.warnings.numpy().tolist() == [mk.TOO_MANY.encode(), b"", b""]
    assert out.numpy().tolist() == [
        b"x",
        ('<span title="' + "a" * 50_000 + '">X</span> Y').encode(),
        deepest.replace("x", "X").encode(),
    ]


@pytest.mark.slow  # loads the shared export and traces the markup path in process: ~60 s
def test_export_serves_markup_and_alignments_as_in_process(serving_export_dir, one_layer_model_dir):
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding.alignments import align_tensors, word_start_table
    from keras_transformer.decoding.markup_translation import translate_markup
    from keras_transformer.serving import export as ex
    from keras_transformer.serving import op_check
    from keras_transformer.serving.client import format_results

    model, _, tokenizer = artifacts.load_trained(one_layer_model_dir)
    translator = ex.make_translator(model, tokenizer, SearchOptions(beam_size=2))
    starts = word_start_table(tokenizer.model_proto)
    texts = [
        'Click <b>OK</b> at https://x.org now. <p>The cat <x id="1"/> sleeps.</p>',
        "a < b and <i>c",
        "<b>" * 10_000 + "x" + "</b>" * 10_000,
        "",
        'Run <script>a<b</script>it <span translate="no">Acme <b>A</b></span> now.',
        'See <img src="c.png" alt="The cat sleeps."> here.',
    ]
    spec = [tf.TensorSpec([None], tf.string)]
    want = graph_function(lambda t: translate_markup(translator, t, starts), spec)(
        tf.constant(texts)
    )
    loaded = tf.saved_model.load(serving_export_dir)
    got = loaded.signatures["translate_markup"](text=tf.constant(texts))
    for key in ("translations", "alignments", "warnings"):
        assert got[key].numpy().tolist() == want[key].numpy().tolist(), key
    np.testing.assert_allclose(got["scores"].numpy(), want["scores"].numpy(), atol=1e-5)
    assert got["warnings"].numpy().tolist()[1:3] == [mk.MALFORMED.encode(), mk.TOO_MANY.encode()]
    first = got["translations"].numpy()[0].decode()
    assert _tag_skeleton(first) == _tag_skeleton(texts[0]) and "https://x.org" in first
    hidden = got["translations"].numpy()[4].decode()  # through the export's hiding pass
    assert "<script>a<b</script>" in hidden
    assert '<span translate="no">Acme <b>A</b></span>' in hidden
    alt = re.search(r'alt="([^"]*)"', got["translations"].numpy()[5].decode()).group(1)
    plain = loaded.signatures["translate_markup"](text=tf.constant(["The cat sleeps."]))
    assert html.unescape(alt) == plain["translations"].numpy()[0].decode()  # translated
    sources, targets = ["The cat sleeps.", ""], ["Der Hund schläft", "x"]
    aligned = loaded.signatures["align"](source=tf.constant(sources), target=tf.constant(targets))
    expected = align_tensors(model, tokenizer, sources, targets, starts)["alignments"]
    assert aligned["alignments"].numpy().tolist() == expected.numpy().tolist()
    lines = format_results(sources, {"alignments": ["0-0", ""]}, targets=targets)
    assert lines == ["0-0", ""]
    assert not op_check.unservable_ops(serving_export_dir)  # stock TF Serving's op set


_PAGE = """<html><body>
<p id="par_id1">Choose <span class="emph">Format - Cells</span> &amp; click <a href="x.html">OK</a>.
<span class="hidden" hidden="hidden">macOS only</span></p>
<p id="par_id2">Plain text only.</p>
<p id="par_id3">Press <strong>Enter</strong><br/>now.</p>
</body></html>"""
_GERMAN = (("Choose", "Wählen Sie"), ("click", "klicken Sie auf"), ("Press", "Drücken Sie"),
           ("Plain text only.", "Nur Text."), ("now", "jetzt"))  # fmt: skip
_SEITE = _PAGE
for _english, _german in _GERMAN:
    _SEITE = _SEITE.replace(_english, _german)


def test_tagged_dev_set_keeps_inline_tags_of_dev_pages(tmp_path):
    from keras_transformer.data.tagged_corpus import build_tagged_dev, strip_tags

    for lang, page in (("en-US", _PAGE), ("de", _SEITE)):
        (tmp_path / lang / "text").mkdir(parents=True)
        (tmp_path / lang / "text" / "page.html").write_text(page, encoding="utf-8")
    pairs = build_tagged_dev(tmp_path, "de", dev_fraction=0.98, test_fraction=0.01)
    assert [(p.source, p.target) for p in pairs] == [
        (
            'Choose <span class="emph">Format - Cells</span> &amp; click <a href="x.html">OK</a>.',
            'Wählen Sie <span class="emph">Format - Cells</span> &amp; klicken Sie auf '
            '<a href="x.html">OK</a>.',
        ),
        ("Press <strong>Enter</strong> now.", "Drücken Sie <strong>Enter</strong> jetzt."),
    ]  # untagged and hidden text left out; <br/> is a space, as in the plain corpus
    assert strip_tags(pairs[0].source) == "Choose Format - Cells & click OK."
    train = {strip_tags(pairs[1].source)}
    assert len(build_tagged_dev(tmp_path, "de", 0.98, 0.01, train_sources=train)) == 1
    assert build_tagged_dev(tmp_path, "de", dev_fraction=0.0, test_fraction=0.01) == []


@pytest.mark.slow  # loads and traces a model in process: ~40 s
def test_translate_command_with_markup_and_alignments(one_layer_model_dir, tmp_path, capsys):
    from keras_transformer.cli import translate
    from keras_transformer.decoding.alignments import parse_moses

    path = tmp_path / "in.txt"
    path.write_text("Click <b>OK</b> at 3 now.\na <b>c</i>\n", encoding="utf-8")
    flags = ["--model-dir", one_layer_model_dir, "--input", str(path), "--beam-size", "2"]
    assert translate.main([*flags, "--markup", "--alignments"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 2 and f"line 2: {mk.MALFORMED}" in err
    text, links = lines[0].rsplit("\t", 1)
    words = re.sub(mk.TAG, "", text).split()
    assert _tag_skeleton(text) == ["<b>", "</b>"] and "3" in words  # the number restored
    words = len(words)
    assert all(i < 5 and j < words for i, j in parse_moses(links))
    page = "<html>\n<head><script>a<b</script></head>\n<body><p>Click <b>OK</b>.\nNow.</p>"
    path.write_text(page + '\n<p translate="no">x</p></body></html>', encoding="utf-8")
    assert translate.main([*flags, "--markup", "--whole-input"]) == 0  # one input, tags kept
    out = capsys.readouterr().out
    assert _tag_skeleton(out) == _tag_skeleton(path.read_text(encoding="utf-8"))
    assert '<p translate="no">x</p>' in out and "<script>a<b</script>" in out


def test_tag_scores_count_well_formed_and_equal_outputs():
    import sacrebleu

    from keras_transformer.decoding.markup_evaluation import tag_scores

    sources = ["<b>a</b> b", "<i>c</i>", "<u>d</u>"]
    references = ["<b>x</b> y", "<i>z</i>", "<u>w</u>"]
    outputs = ["<b>x</b> y", "<b>z</b>", "<u>w"]  # equal; other tags; not well-formed
    got = tag_scores(sources, references, outputs)
    assert (got["well_formed"], got["tags_equal"]) == (pytest.approx(2 / 3), pytest.approx(1 / 3))
    want = sacrebleu.corpus_chrf(["x", "", ""], [["x", "z", "w"]]).score
    assert got["chrf_inside_tags"] == pytest.approx(want)


def test_character_references_decode_as_pythons_html_unescape():
    # Independent reference: Python's html.unescape (HTML5's rules) on random texts of named
    # references, decimal and hexadecimal ones (Windows-1252's 128-159, surrogates, 0 and
    # past U+10FFFF included), unknown names and plain text, decoded in a traced function.
    import html

    from keras_transformer.data.entities import NAMED, decode_entities

    rng = np.random.default_rng(0)
    names, pieces = sorted(NAMED), ["a", " ", "&", ";", "&bogus;", "&amp;lt;", "caf\u00e9", "<"]

    def reference():
        code = int(rng.choice([rng.integers(0x20, 0x7F), rng.integers(0x80, 0xA0),
                               rng.integers(0xA0, 0xD800), rng.integers(0xD800, 0xE000),
                               rng.integers(0xE000, 0xFDD0), rng.integers(0x10000, 0x10FFFF),
                               0, 0x110000]))  # fmt: skip
        if rng.random() < 0.5:
            return f"&#{code};"
        return f"&#{'x' if rng.random() < 0.5 else 'X'}{code:x};"

    texts = []
    for _ in range(200):
        parts = []
        for _ in range(rng.integers(0, 8)):
            kind = rng.integers(3)
            if kind == 0:
                parts.append(f"&{names[rng.integers(len(names))]};")
            elif kind == 1:
                parts.append(reference())
            else:
                parts.append(pieces[rng.integers(len(pieces))])
        texts.append("".join(parts))
    decode = graph_function(decode_entities)
    got = [t.decode() for t in decode(tf.constant(texts)).numpy()]
    assert got == [html.unescape(t) for t in texts]
    assert sum("&#" in t for t in texts) > 50 and sum(t != g for t, g in zip(texts, got)) > 150


def _covers_reference(first, last, links):
    """The covers' rule in NumPy, one tag at a time (`data.covers.covers` docstring)."""
    low, high, slot = (np.zeros(first.shape, np.int64) for _ in range(3))
    for b, t in np.ndindex(first.shape):
        row = links[b]
        inside = np.flatnonzero((row >= first[b, t]) & (row <= last[b, t]))
        before = np.flatnonzero((row >= 0) & (row < first[b, t]))
        low[b, t] = inside.min() if inside.size else 1
        high[b, t] = inside.max() if inside.size else -1
        slot[b, t] = before.max() + 1 if before.size else 0
    return low, high, slot


@pytest.mark.parametrize("seed", range(4))
def test_covers_match_the_rule_tag_by_tag(seed):
    # Random spans (empty ones included) over random alignments (unaligned words, sources
    # aligned to nothing, more tags than words), against the NumPy rule.
    rng = np.random.default_rng(seed)
    batch, tags, words, width = 3, int(rng.integers(1, 40)), int(rng.integers(1, 30)), 25
    first = rng.integers(0, words + 1, (batch, tags))
    last = np.where(rng.random((batch, tags)) < 0.2, first - 1,
                    np.minimum(first + rng.integers(0, 6, (batch, tags)), words - 1))  # fmt: skip
    links = rng.integers(-1, words, (batch, int(rng.integers(0, width))))
    got = covers(*(tf.constant(x, tf.int32) for x in (first, last, links)))
    for value, want in zip(got, _covers_reference(first, last, links)):
        np.testing.assert_array_equal(value.numpy(), want)
