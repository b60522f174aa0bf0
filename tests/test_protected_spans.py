"""Protected spans (`data/protected_spans.py`): a case per pattern of the table, and the
placement of missing spans by hand-written alignments against the expected sentences."""

import re
import unicodedata

import pytest
import tensorflow as tf

from keras_transformer.data import protected_spans as ps
from keras_transformer.data.tokenizer import remove_invisible_text
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


def test_spans_joined_by_other_characters_than_letters_are_one():
    import random

    text = 'On 12/05/2024, 1,000–2,000 (1.2.3/1.2.4) Ctrl+C/Ctrl+V 10am-5pm 3x4 "1-2";0 4×3 x86_64'
    assert _spans(text) == [
        "12/05/2024", "1,000–2,000", "1.2.3/1.2.4", "Ctrl+C/Ctrl+V", "10", "3", "1-2", "4×3",
        "86_64",
    ]  # fmt: skip
    # Against Python's re: every span of the table, left to right, then joined (`_joined`).
    table = re.compile(ps.span_regex(), re.ASCII)  # RE2's \d, \w and \s are ASCII
    pool = list("0123456789/-–.,:;_+%'\"×xaAé|€( ") + ["Ctrl+", "Shift+", "https://", "www.", "@",
                                                "{0}", "%s", "$(A)", "F5", "\u00a0"]  # fmt: skip
    rng = random.Random(0)
    words = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 8))) for _ in range(600)]
    words = [w for w in (w.strip().split()[0] if w.strip() else "" for w in words) if w]
    got = [s.decode() for s in ps.first_spans(tf.constant(words)).numpy()]
    expected = [_joined(w, [m.span() for m in table.finditer(w)]) for w in words]
    assert got == expected


def test_restore_keeps_copies_replaces_and_inserts():
    sources = [
        "Open https://example.com/help and press Ctrl+Shift+F5 to refresh 3 cells.",
        "Saved %s files.",
        "No spans here.",
    ]
    translations = [
        "Öffnen Sie https://exp.com/d und drücken Sie Strg+F5 Zellen.",  # Shift dropped
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


SPM_TEXTS = [
    "Open the file and press OK to save 3 cells.",
    "Öffnen Sie die Datei und drücken Sie OK, um 3 Zellen zu speichern.",
    "Café, naïve façade: 12% größer (Straße) - 5 € [x] {y}",
] * 20
POOL = list("abcXYZ019.,;!?()-_'\"éüßöï½©€👍🙂✅ЖиΩωאąñ\u0301") + ["ﬁ", "Ａ", "Ｏ", "²", "東", "京"]
POOL += ["\u00ad", "\u200b", "\u200d", "\ufe0f", "\ufeff", "\u2060"]  # invisible characters


def _spm(tmp_path, **options):
    import io

    import sentencepiece

    proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(SPM_TEXTS), model_writer=proto, vocab_size=400,
        character_coverage=1.0, hard_vocab_limit=False, minloglevel=2, **options,
    )  # fmt: skip
    return proto.getvalue()


def _unknown_reference(word, unknown):
    """The first maximal run of letters, marks, digits, invisible and unknown characters that
    holds an unknown one, with the runs joined to it (`_joined`), in Python."""

    def joins(c):
        return unicodedata.category(c)[0] in "LMN" or not remove_invisible_text(c) or unknown(c)

    runs = [m.span() for m in re.finditer(
        "(?:" + "|".join(re.escape(c) for c in sorted(set(word)) if joins(c)) + ")+", word
    ) if any(unknown(c) for c in m.group())] if word else []  # fmt: skip
    return _joined(word, runs)


def _joined(word, spans):
    """The first of `spans` (start, end) in `word` with those after it that only `JOINER`
    characters part from it ("" if none), in Python."""
    if not spans:
        return ""
    start, end = spans[0]
    for a, b in spans[1:]:
        if not re.fullmatch(f"{ps.JOINER}*", word[end:a]):
            break
        end = b
    return word[start:end]


def test_unknown_span_is_what_the_tokenizer_reads_as_unknown(tmp_path):
    import random

    import sentencepiece

    proto = _spm(tmp_path)
    processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
    unknown = ps.unknown_span(proto)
    assert unknown is not None and ps.span_patterns(proto)[-1] == unknown
    assert ps.span_patterns(None) == ps.PATTERNS

    def is_unknown(char):  # the reference: SentencePiece itself, NFKC normalization and all,
        return processor.unk_id() in processor.encode(remove_invisible_text(char))  # as read

    assert [c for c in "aé€ﬁＯ²" if is_unknown(c)] == []  # "ﬁ" is "fi", "Ｏ" "O" after NFKC
    assert all(is_unknown(c) for c in "👍Ж東ωא©Ａ")  # no "A" in the texts
    rng = random.Random(0)
    texts = [" ".join("".join(rng.choice(POOL) for _ in range(rng.randint(1, 6)))
                      for _ in range(rng.randint(1, 5))) for _ in range(300)]  # fmt: skip
    got = ps.protected_words(tf.constant(texts), [unknown]).to_list()
    for text, spans in zip(texts, got):
        words = [w for w in text.split() if remove_invisible_text(w)]  # as the model reads
        bare = [re.sub(ps.EDGE_PUNCTUATION, "", word) for word in words]
        bare = [w if any(map(is_unknown, w)) else re.sub(ps.EDGE_PUNCTUATION, "",
                                                          remove_invisible_text(w))
                for w in bare]  # as read  # fmt: skip
        expected = [_unknown_reference(word, is_unknown) for word in bare]
        assert [s.decode() for s in spans] == expected, text
    out = ps.restore_spans(["Open 👍 Иван."], ["Danke x y."], [[0, 1, 2]], ps.span_patterns(proto))
    assert out.numpy()[0].decode() == "Danke 👍 Иван."  # "!" would be unknown here too


def test_a_model_with_byte_fallback_writes_every_character(tmp_path):
    proto = _spm(tmp_path, byte_fallback=True)
    assert ps.unknown_span(proto) is None and ps.span_patterns(proto) == ps.PATTERNS


def test_spans_are_read_without_the_words_edge_punctuation():
    assert _spans('Click >>, then "|" or „›“ at 10. Set $(INSTDIR).') == [
        ">>", "|", "›", "10", "$(INSTDIR)"
    ]  # fmt: skip
    out = ps.restore_spans(["Click >> now"], ["Klicken Sie >>, jetzt"], [[0, 0, 1, 2]])
    assert out.numpy()[0].decode() == "Klicken Sie >>, jetzt"  # copied: nothing inserted


def test_a_missing_separator_is_inserted_not_put_in_place_of_a_word():
    sources = ["Home | Help › Tools", "Open 3 files"]
    translations = ["Start Hilfe Werkzeuge", "Öffnen Sie x Dateien"]
    links = tf.constant([[0, 1, 2, 4], [0, 0, 1, 2]])  # "Hilfe" aligned to "|" by the model
    out = ps.restore_spans(sources, translations, links).numpy().tolist()
    assert out == ["Start | Hilfe Werkzeuge ›".encode(), "Öffnen Sie 3 Dateien".encode()]
    again, restored = ps.restore_spans(sources + ["Keine  Spannen."], translations + ["x"],
                                       tf.pad(links, [[0, 1], [0, 0]], constant_values=-1),
                                       with_links=True)  # fmt: skip
    assert again.numpy().tolist()[:2] == out
    # each restored span linked to its own source word, the model's words to none
    assert restored.to_list() == [[-1, 1, -1, -1, 3], [-1, -1, 1, -1], [-1]]


def test_invisible_characters_are_read_as_the_model_reads_them(tmp_path):
    """A soft hyphen, zero-width space or word joiner inside a span is not part of it (the
    tokenizer removes them), a word of letters with one is no unknown span, and an emoji
    sequence keeps its joiners and variation selector verbatim."""
    patterns = ps.span_patterns(_spm(tmp_path))  # its unknown row: "4", "+", "P" too

    def spans(texts, patterns):
        return [
            [w.decode() for w in row if w]
            for row in ps.protected_words(tf.constant(texts), patterns).to_list()
        ]

    assert spans(["Press 1\u00ad234 or Ctrl+\u200bS at https://ex\u2060ample.com/a now"],
                 ps.PATTERNS) == [["1234", "Ctrl+S", "https://example.com/a"]]  # fmt: skip
    assert spans(["\ufeffOpen the spread\u200bsheet \u200e3\u200f.",
                  "Our 👨\u200d👩\u200d👧 and ❤\ufe0f!"], patterns) == [
        ["3"], ["👨\u200d👩\u200d👧", "❤\ufe0f"]]  # fmt: skip
    out = ps.restore_spans(["Our 👨\u200d👩\u200d👧 here"], ["die hier"], [[0, 2]],
                           patterns)  # fmt: skip
    assert out.numpy()[0].decode() == "die 👨\u200d👩\u200d👧 hier"


def test_a_no_break_space_parts_words_as_the_model_reads_them():
    """Spans are read per word as SentencePiece reads words: "1\u00a0000" is two numbers
    (the alignments index those words), and a word of invisible characters only is none."""
    got = ps.protected_words(tf.constant(["Pay 1\u00a0000 \u200b €\u202fnow at 3\u2009pm"]))
    assert [w.decode() for w in got[0].numpy()] == ["", "1", "000", "", "", "", "3", ""]


def test_a_missing_span_replaces_the_models_stray_of_its_row():
    sources = [
        "Released on 03/15/2012 (see https://example.com/a).",
        "From 10 to 20 and 30.",
        "Press Ctrl+C/Ctrl+V and see 7.",
        "Pay $15,000 for 12.5MB.",
    ]
    translations = [  # the model's mangled date is not the word aligned to the source's
        "Veröffentlicht nächsten Befehl (0/30/112,5/2012) https://exa.com/b.",
        "Von 1 bis 2 und 30.",  # two strays of the number row, in order
        "Drücken Sie Strg+X/Strg+V 9 und siehe.",  # the number's stray is not the key's
        "Zahlen Sie $0,00 für 12.M5BM.",  # "$" around a stray stays, letters do not
    ]
    links = tf.constant(
        [[0, 1, 2, 1, 4, -1, -1], [0, 1, 2, 1, 4, 5, -1], [0, 0, 1, 4, 3, 2, -1],
         [0, 0, 1, 2, 3, -1, -1]], tf.int32
    )  # fmt: skip
    out = [t.decode() for t in ps.restore_spans(sources, translations, links).numpy()]
    assert out == [
        "Veröffentlicht nächsten Befehl (03/15/2012) https://example.com/a.",
        "Von 10 bis 20 und 30.",
        "Drücken Sie Ctrl+C/Ctrl+V 7 und siehe.",  # "Strg+X" is another key: a stray
        "Zahlen Sie $15,000 für 12.5.",
    ]


def test_a_stray_in_a_call_keeps_the_call():
    """A stray whose span follows an opening bracket, "=" or ";" keeps the word before it: a
    formula's function name stays ("=RUNDEN(2,346;2)" is no copy of "=ROUND(2.348;2)"); a
    span with letters glued to it is still replaced whole."""
    out = ps.restore_spans(
        ["=ROUND(2.348;2) returns 2.35", "Search (8.7%)", "Set x=0.25 now"],
        ["=RUNDEN(2,346;2) ergibt 2,35", "Suche (II8,7)", "Setze x=0,3 jetzt"],
        tf.fill([3, 4], -1),
    )  # fmt: skip
    assert [t.decode() for t in out.numpy()] == [
        "=RUNDEN(2.348;2) ergibt 2,35",  # "2,35": the same number in German style
        "Suche (8.7)",
        "Setze x=0.25 jetzt",
    ]


def test_a_sign_the_model_dropped_comes_back():
    out = ps.restore_spans(
        ["It fell to -5 °C (+4.3%).", "Call +49 30 at COVID-19 time."],
        ["Es fiel auf 5 °C (4.3 %).", "Rufen Sie 49 30 zur COVID-19-Zeit an."],
        [[0, 1, 2, 3, 4, 5, -1], [0, 0, 1, 2, 4, 5, 0]],
    )  # fmt: skip
    assert [t.decode() for t in out.numpy()] == [
        "Es fiel auf -5 °C (+4.3 %).",
        "Rufen Sie +49 30 zur COVID-19-Zeit an.",  # "19" of a word is no sign's
    ]


def _same_number(written: str, source: str) -> bool:
    """The reference: the same digits with separators at the same places, or a whole number
    with the same digits, unless the source writes four digits whole and `written` in groups."""
    if re.sub(r"[.,' ]", ".", written) == re.sub(r"[.,' ]", ".", source):
        return True
    whole = re.compile(r"\d{1,3}(?:([.,' ])\d{3})*|\d+")
    digits = [re.sub(r"\D", "", t) for t in (written, source)]
    return (whole.fullmatch(written) is not None and whole.fullmatch(source) is not None
            and digits[0] == digits[1] and not re.fullmatch(r"\d[.,' ]\d{3}", written))  # fmt: skip


def _written(value: float, decimals: int, locale: str) -> str:
    """`value` as `locale` writes it (the reference for `test_a_number_in_any_locale_...`)."""
    english = f"{value:,.{decimals}f}"
    group, point = {"en": (",", "."), "de": (".", ","), "fr": (" ", ","), "ch": ("'", "."),
                    "plain": ("", ",")}[locale]  # fmt: skip
    return english.replace(",", "\0").replace(".", point).replace("\0", group)


def test_a_number_in_any_locale_is_the_sources_and_a_wrong_one_is_replaced_whole():
    """Against Python's own number formatting: an output that writes the source's number in
    German, French (groups as words), Swiss or English style, or a whole number without its
    groups, is kept; one that writes another number, mixes two styles ("12,500,75") or has a
    letter in its word is replaced by the source's number, all of its words (unless it is
    the source's text)."""
    import random

    rng = random.Random(0)
    sources, translations, expected = [], [], []
    for i in range(300):
        decimals = rng.choice([0, 0, 1, 2])
        value = round(rng.choice([rng.randint(0, 999), rng.randint(1000, 10**7)])
                      + rng.random() * (decimals > 0), decimals)  # fmt: skip
        other = value if i % 3 else round(value + rng.randint(1, 999), decimals)
        source = _written(value, decimals, "en")
        mixed = i % 3 == 2 and "," in source and "." in source
        lettered = i % 3 == 2 and not mixed  # in one word: "x2 391 659" is three numbers
        styles = ["en", "de", "ch", "plain"] + ["fr"] * (not lettered)
        written = _written(other, decimals, rng.choice(styles))
        if mixed:
            written = source.replace(".", ",")
        sources.append(f"Pay {source} euros now.")
        translations.append(f"Zahlen Sie {'x' * lettered}{written} Euro jetzt.")
        same = _same_number(written, source) and not (mixed or lettered)
        kept = same or written == source
        expected.append(translations[-1] if kept else f"Zahlen Sie {source} Euro jetzt.")
    links = tf.fill([len(sources), 8], -1)
    out = [t.decode() for t in ps.restore_spans(sources, translations, links).numpy()]
    assert out == expected
    assert sum(o != t for o, t in zip(out, translations, strict=True)) >= 100  # both kinds met


def test_word_keys_are_read_together_only_after_a_short_lead():
    text = "Seit 2019 500 Menschen, 1 000 000 und (12 500,5) 7, 100"
    words, spans = ps._read(tf.constant([text]), ps.PATTERNS)
    keys, continues = ps._word_keys(words, spans)
    got = [(w.decode(), k[3].decode().removeprefix("\x01"), bool(c)) for w, k, c in
           zip(words.flat_values.numpy(), keys.numpy(), continues.numpy())]  # fmt: skip
    numbers = [g for g in got if g[1]]
    assert numbers == [
        ("2019", "2019", False), ("500", "500", False),  # four digits lead no group
        ("1", "1.000.000", False), ("000", "1.000.000", True), ("000", "1.000.000", True),
        ("(12", "12.500.5", False), ("500,5)", "12.500.5", True),
        ("7,", "7", False), ("100", "100", False),  # a comma parts two numbers
    ]  # fmt: skip


def test_a_wrong_grouped_number_keeps_the_groups_the_source_holds():
    out = ps.restore_spans(["Call +33 103 100 now."], ["Rufen Sie 33 103 100 an."],
                           [[0, 0, 1, 2, 3, -1]])  # fmt: skip
    assert out.numpy()[0].decode() == "Rufen Sie +33 103 100 an."


def test_a_number_with_other_separators_or_digits_is_not_the_sources():
    out = ps.restore_spans(
        ["The value 6000 is returned (30,070).", "Released in 2021.", "Set 2.5 or 1,000.5.",
         "Pay 1,500 or 12,500 now."],
        ["La valeur 6 000 est renvoyée (0707).", "Erschienen 2,021.", "Mit 25 oder 1000,5.",
         "Zahlen Sie 1500 oder 12500 jetzt."],
        tf.fill([4, 7], -1),
    )  # fmt: skip
    assert [t.decode() for t in out.numpy()] == [
        "La valeur 6000 est renvoyée (30,070).",  # "6 000" and "0707": two strays, in order
        "Erschienen 2021.",  # a year the model wrote as a number
        "Mit 2.5 oder 1,000.5.",
        "Zahlen Sie 1500 oder 12500 jetzt.",  # whole numbers without their groups
    ]


def test_every_key_name_ends_in_an_ascii_letter_or_digit():
    """The last key of a combination ends at RE2's \\b, which is ASCII only."""
    names = [n for _, row in ps.KEY_NAMES for n in row.split()]
    assert all(re.fullmatch(r".*[A-Za-z0-9]", n) for n in names)
    assert len(set(n.lower() for n in names)) == len(names)  # one key per name
    rows = [r for r, (_, row) in enumerate(ps.KEY_NAMES) for _ in row.split()]
    found = ps._key_rows(tf.constant([n.lower() for n in names] + ["f5", "q", "", "bildx"]))
    assert found.numpy().tolist() == rows + [-1] * 4
    # "F5x": digits inside a name hold no span ("BIN2HEX", "H2O")
    assert _spans("In AF5 or F5x, F5 is a key and 5 a number.") == ["5", "F5", "5"]
    assert _spans("BIN2HEX(Number) of H2O, COVID-19, MP3 and A1:B2") == ["19", "3", "1"]


def _combination_key(text):
    """Python's reading of a key combination: the set of its modifiers and its other keys
    in order, each by its row of `KEY_NAMES`, in any case."""
    row = {n.lower(): key for key, names in ps.KEY_NAMES for n in names.split()}
    modifiers = {key for key, _ in ps.MODIFIER_NAMES}
    keys = [row.get(n.lower(), n.lower()) for n in text.split("+")]
    return frozenset(k for k in keys if k in modifiers), tuple(
        k for k in keys if k not in modifiers
    )


def test_a_key_combination_in_other_names_or_order_is_the_sources_and_another_is_replaced():
    """Against `_combination_key`: an output that writes the source's keys by any of their
    names, in any case, its modifiers in any order ("Umschalt+Strg+Eingabe" for
    "Ctrl+Shift+Enter") is kept; one that writes other keys is the model's stray of the row
    and is replaced by the source's combination."""
    import random

    rng = random.Random(0)
    rows = [(key, names.split()) for key, names in ps.KEY_NAMES]
    modifier_rows = rows[: len(ps.MODIFIER_NAMES)]
    key_rows = rows[len(ps.MODIFIER_NAMES) :] + [("f5", ["F5"]), ("q", ["Q"]), ("7", ["7"])]
    sources, translations, expected = [], [], []
    for i in range(300):
        modifiers = rng.sample(modifier_rows, rng.randint(1, 3))
        key = rng.choice(key_rows)
        source = "+".join([rng.choice(m[1]) for m in modifiers] + [rng.choice(key[1])])
        if i % 3 == 2:  # other keys: one modifier fewer or another key
            key = rng.choice(key_rows) if len(modifiers) == 1 else key
            modifiers = modifiers[1:] if len(modifiers) > 1 else modifiers
        written = [rng.choice(m[1]) for m in rng.sample(modifiers, len(modifiers))]
        written = "+".join(written + [rng.choice(key[1])])
        written = written.upper() if i % 5 == 0 else written.lower() if i % 7 == 0 else written
        sources.append(f"Press {source} now.")
        translations.append(f"Drücken Sie {written} jetzt.")
        same = _combination_key(written) == _combination_key(source)
        expected.append(translations[-1] if same else f"Drücken Sie {source} jetzt.")
    links = tf.fill([len(sources), 4], -1)
    out = [t.decode() for t in ps.restore_spans(sources, translations, links).numpy()]
    assert out == expected
    assert sum(o != t for o, t in zip(out, translations, strict=True)) >= 60  # both kinds


def test_a_key_the_model_named_in_its_language_is_not_put_back_beside_it():
    """German and French key names as the bundled references write them, with the
    alignments of the model's output; before, each came back in English, or twice."""
    sources = ["To enter a manual line break, press Ctrl+Enter in the cell.",
               "Press Alt+Page Up to go up.", "Press Shift+Ctrl+Q to stop."]  # fmt: skip
    translations = ["Um einen Umbruch einzufügen, drücken Sie Strg+Eingabetaste.",
                    "Drücken Sie Alt+Bild nach oben.",
                    "Appuyez sur Ctrl+Maj+Q pour arrêter."]  # fmt: skip
    links = tf.constant([[2, 4, 4, 6, 6, 7], [0, 0, 1, 2, 2, -1], [0, 0, 1, 3, 3, -1]])
    out = [t.decode() for t in ps.restore_spans(sources, translations, links).numpy()]
    assert out == translations


def _readings(text):
    """Python's `datetime` readings of a date: ISO, day first (".", "-", "/"), month first
    ("/" only)."""
    import datetime

    found = set()
    for form in ("%Y-%m-%d", "%d.%m.%Y", "%d-%m-%Y", "%d/%m/%Y", "%m/%d/%Y"):
        try:
            found.add(datetime.datetime.strptime(text, form).date())
        except ValueError:
            pass
    return found


def test_a_date_in_another_order_and_a_formula_in_the_targets_style_are_the_sources():
    """Against Python's `datetime` (`_readings`): a date the output writes in ISO, day-first
    (".", "/" or "-") or, with "/", month-first order is the source's date when one reading of
    each is the same day; another day is replaced by the source's. A formula whose arguments
    are the source's in the target's style ("=RUNDEN(2,348;2)") is kept; one with another
    number is not."""
    import datetime
    import random

    rng = random.Random(0)
    forms = {"iso": "%Y-%m-%d", "de": "%d.%m.%Y", "fr": "%d/%m/%Y", "us": "%m/%d/%Y",
             "dash": "%d-%m-%Y"}  # fmt: skip
    sources, translations, expected = [], [], []
    for i in range(200):
        day = datetime.date(2000, 1, 1) + datetime.timedelta(days=rng.randint(0, 9000))
        other = day if i % 3 else day + datetime.timedelta(days=rng.randint(1, 40))
        source_form, output_form = rng.choice(["iso", "us"]), rng.choice(list(forms))
        source, written = day.strftime(forms[source_form]), other.strftime(forms[output_form])
        if rng.random() < 0.3:  # without leading zeros
            written = written.replace("/0", "/").replace(".0", ".").lstrip("0")
        same = bool(_readings(written) & _readings(source))
        sources.append(f"Due on {source} here.")
        translations.append(f"Fällig am {written} hier.")
        expected.append(translations[-1] if same else f"Fällig am {source} hier.")
    links = tf.fill([len(sources), 4], -1)
    out = [t.decode() for t in ps.restore_spans(sources, translations, links).numpy()]
    assert out == expected
    assert sum(o != t for o, t in zip(out, translations, strict=True)) >= 40  # both kinds
    formulas = ps.restore_spans(
        ["=ROUND(2.348;2) returns 2.35.", "=NORMINV(0.9;63;5) returns 69.41."],
        ["=RUNDEN(2,348;2) ergibt 2,35.", "=NORMINV(0,9;64;5) ergibt 69,41."],
        tf.fill([2, 3], -1),
    )  # fmt: skip
    assert [t.decode() for t in formulas.numpy()] == [
        "=RUNDEN(2,348;2) ergibt 2,35.",
        "=NORMINV(0.9;63;5) ergibt 69,41.",  # 64 is another number: the source's run
    ]


def test_digits_inside_a_source_name_are_no_span_but_an_outputs_stray_still_is():
    """A source word whose only digits sit inside a name ("BIN2HEX") holds no span, so the
    model's translated name stays; an output word's digits inside letters are still its
    mangled copy of a missing number, and are replaced."""
    out = ps.restore_spans(
        ["Use BIN2HEX(Number) now.", "Use StarCalc 1.0 files."],
        ["Verwenden Sie BININHEX(Zahl) jetzt.", "Verwenden Sie StarCalc0Dateien."],
        tf.constant([[0, 0, 1, 2], [0, 0, 1, -1]]),
    )
    assert [t.decode() for t in out.numpy()] == [
        "Verwenden Sie BININHEX(Zahl) jetzt.",
        "Verwenden Sie 1.0.",
    ]
