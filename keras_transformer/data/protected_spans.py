"""Protected spans: URLs, e-mail addresses, numbers, key combinations, placeholders and words
holding a character the vocabulary cannot write (emoji, names in another script:
`unknown_span`, built from the SentencePiece model) come back verbatim, in stock TensorFlow
string ops (the export runs them; no py_function).

    words = protected_words(tf.constant(["Press Ctrl+Shift+F5 to refresh 3 cells."]))
    # spans (1, None): [["", "Ctrl+Shift+F5", "", "", "3", ""]]  ("" where a word has none)
    restore_spans(sources, translations, links)  # string (n,): each missing span put back

How. The model translates the sentence as it is (it sees the span in context). Afterwards,
for each source word that holds a span (its first one, by the first pattern of `PATTERNS`
that matches, with the spans `JOINER` characters join to it: "12/05/2024", "1,000–2,000",
"Ctrl+C/Ctrl+V" are one), the output is searched for the same span (the
first span of each output word, read the same way): where the model copied it, nothing
changes. A number the model wrote in its own language's style is a copy too: "1.000" or
"1 000" (two words, read as one: `_word_keys`) for "1,000", "2,5" for "2.5" (not in a
word with a letter next to a digit, nor a mix of styles: `_STYLED_NUMBER`). So is a key
combination written with the model's language's names of its keys, its modifiers in any
order: "Strg+Umschalt+F1", "Umschalt+Strg+F1" or "Ctrl+Maj+F1" for "Ctrl+Shift+F1"
(`KEY_NAMES`); a date in another order ("28.02.2001" for "2001-02-28": `_date_keys`); a
formula's arguments in the model's style ("=RUNDEN(2,348;2)" for "=ROUND(2.348;2)"). Where
it did not, it replaces the
model's stray of its row, where the model wrote one: an output word whose span no source
word of the sentence holds ("0/30/112,5/2012" for "03/15/2012"; the k-th missing span of a
row takes the k-th stray of that row). Else
the span is placed by the word alignments (`links`: the source word of each output word, as
`decoding.alignments.align_ids` returns them): it replaces the first output word aligned to
its source word, or, where no output word is aligned to it or its row does not replace
(`SpanPattern.replaces`: separators), it is inserted after the output word aligned to the
nearest source word before it (at the start if none). A replaced word keeps its opening
brackets and quotes and its trailing punctuation; a stray whose span has no letter or digit
around it keeps all around it ("$0,00" -> "$15,000"; so does one in a call:
"=RUNDEN(2.348;2)"), and the words that continue its
number go ("1 500" -> "1,000" for "1,000"). So every span of the source comes
back verbatim, once per source word that holds it.

A span is found inside one whitespace word (the unit of the alignments): `<x id="1"/>`,
which holds a space, is a self-closing tag of the markup path (`data/markup.py`).

To extend the table, add a `SpanPattern` to `PATTERNS` (earlier rows win where two match at
the same place) and a case for it in `keras_transformer.testing.span_cases` (the tests fail
for a pattern without one). Patterns are RE2: no look-around.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

import tensorflow as tf

from keras_transformer.data.tokenizer import (
    INVISIBLE,
    re2_ranges,
    remove_invisible,
    split_words,
)

# Keys by their names in English and in other languages (German and French as the bundled
# references write them: "Strg+Umschalt+F1", "Ctrl+Maj+Entrée"; Spanish and Italian as
# Microsoft's keyboards print them). A combination the model wrote with other names of the
# same keys is the source's (`_key_names`). Each row: a key and its names, in any case. Arrow
# keys and the two page keys are one key each ("Pfeil nach oben", "Bild nach unten", "Flèche
# vers le haut": the direction is a word of its own).
MODIFIER_NAMES = (
    ("ctrl", "Ctrl Control Strg"),
    ("shift", "Shift Umschalt Maj Mayús Maiusc"),
    ("alt", "Alt"),
    ("altgr", "AltGr"),
    ("option", "Option Opt Wahl"),
    ("command", "Cmd Command Befehl Commande"),
    ("meta", "Meta"),
    ("super", "Super"),
    ("win", "Win"),
    ("fn", "Fn"),
)
KEY_NAMES = MODIFIER_NAMES + (
    ("enter", "Enter Return Eingabe Eingabetaste Entrée Intro Invio"),
    ("tab", "Tab Tabulator Tabulatortaste Tabulation"),
    ("space", "Space Spacebar Leertaste Leerzeichen Espace Barre Espacio Spazio"),
    ("escape", "Esc Escape Échap Echap"),
    ("home", "Home Pos1 Origine Début Inicio"),
    ("end", "End Ende Fin Fine"),
    ("delete", "Delete Del Entf Suppr Supr Canc"),
    ("insert", "Insert Ins Einfg Inser"),
    ("backspace", "Backspace Rückschritt Rücktaste Retour Retroceso"),
    ("page", "PageUp PageDown PgUp PgDn Page Bild Seite RePág AvPág"),
    ("arrow", "Up Down Left Right Arrow Arrows Pfeil Pfeiltaste Pfeiltasten Aufwärtspfeil"),
    ("arrow", "Abwärtspfeil Flèche"),
    ("plus", "Plus"),
    ("minus", "Minus Moins"),
)


def _alternatives(rows) -> str:
    """Names of `rows`, longest first."""
    return "|".join(sorted((n for _, names in rows for n in names.split()), key=len, reverse=True))


MODIFIERS = f"(?i:{_alternatives(MODIFIER_NAMES)})"  # "ctrl+a", "CTRL+A" too
# The last key of a combination ends where its word does or at a character that is no ASCII
# letter or digit: "Alt+Page Up" holds "Alt+Page", not "Alt+P". (RE2's \b is ASCII: every
# name ends in an ASCII letter.)
KEYS = f"(?i:F\\d{{1,2}}|{_alternatives(KEY_NAMES)}|[A-Za-z0-9])\\b"
# Not a closing bracket: "$(INSTDIR)" ends with one.
EDGE_OPENING = r"[(\[\"'„“‚‘]"
EDGE_PUNCTUATION = f"^{EDGE_OPENING}+|[.,;:!?\"'”“’]+$"
PLACE_PUNCTUATION = r"[.,;:!?)\]\"'”’»]*"  # what a replaced output word keeps at its end
PLACE_OPENING = r"[(\[\"'„“‚‘«]*"  # and at its start: "(0/30/112,5/2012)." -> "(03/15/2012)."
# Between two spans of one word, what joins them into one: "12/05/2024", "2024-05-12",
# "1,000–2,000", "1.2.3/1.2.4", "Ctrl+C/Ctrl+V", "1920×1080", "x86_64", a formula's
# "2016;9;12" are one span each. Not letters ("10am-5pm" holds two spans), quotes or brackets
# (a formula's `"2008-07-01";0` holds two).
JOINER = r"[-–—/+.:;_×]"
# A number as a language writes it: digits, grouped by threes with one separator throughout,
# then the other of "." and "," before its decimals ("1,000.5", "1.000,5", "1'000.5",
# "1 000,5": French and SI, as words the model writes apart, read together by
# `_word_keys`; no-break and thin spaces too), or one "." or "," before its decimals
# ("2.5", "2,5"). Such a number the model wrote in its own language's style is the source's
# number, copied (`_number_keys`): with its separators where the source has them ("1.000"
# and "1 000" for "1,000", "2,5" for "2.5"), or a whole number without its groups ("1500"
# for "1,500", "12500" for "12,500"; in French and German "1,500" would read 1.5). Not a
# version or a mix ("3.9.7", "1,000,5"), nor a four-digit number the source writes whole and
# the model in groups ("2,021" for the year "2021").
_SPACES = " \u00a0\u202f\u2009"  # between groups of digits: space, no-break, narrow, thin
NUMBER_SEPARATOR = f"[.,'’{_SPACES}]"
_GROUPS = (",", r"\.", "['’]", f"[{_SPACES}]")  # one separator throughout a number's groups
_DECIMALS = (r"\.", ",", "[.,]", "[.,]")  # and what each grouping writes before decimals
_SIGN = "[+\\-−]?"
_WHOLE = _SIGN + "(?:" + "|".join([r"\d+"] + [f"\\d{{1,3}}(?:{g}\\d{{3}})+" for g in _GROUPS]) + ")"
_STYLED_NUMBER = _SIGN + "(?:" + "|".join(
    [f"\\d{{1,3}}(?:{g}\\d{{3}})+(?:{d}\\d+)?" for g, d in zip(_GROUPS, _DECIMALS, strict=True)]
    + [r"\d+(?:[.,]\d+)?"]
) + ")"  # fmt: skip
# One, a range of them, or a formula's arguments ("=ROUND(2.348;2)", "=RUNDEN(2,348;2)").
_NUMERIC = f"{_STYLED_NUMBER}(?:[-–—/×;]{_STYLED_NUMBER})*"
_FOUR_IN_GROUPS = f"{_SIGN}\\d{NUMBER_SEPARATOR}\\d{{3}}"  # "2,021", "6 000"
# A date in any order of its parts, as year-month-day without leading zeros: ISO
# ("2001-02-28"), day first ("28.02.2001", "28/02/2001", "28-02-2001"); a date with "/" also
# month first (US: "02/28/2001"), so "15.03.2012" is "03/15/2012".
_DATES = (
    (r"(\d{4})-0?(\d{1,2})-0?(\d{1,2})", "\x04\\1-\\2-\\3"),
    (r"0?(\d{1,2})[./-]0?(\d{1,2})[./-](\d{4})", "\x04\\3-\\2-\\1"),
)
_MONTH_FIRST = (r"0?(\d{1,2})/0?(\d{1,2})/(\d{4})", "\x04\\3-\\1-\\2")


@dataclass(frozen=True)
class SpanPattern:
    """One row of the table: text that fully matches `pattern` (RE2) is protected. A missing
    span replaces the model's stray of its row or the output word aligned to it (`replaces`,
    the model wrote that word for it), else it is inserted after the word aligned before it."""

    name: str
    pattern: str
    replaces: bool = True


PATTERNS = (
    SpanPattern("url", r"(?:https?|ftp)://[^\s<>\"]*[^\s<>\".,;:!?)\]}']|www\.[^\s<>\"]*[\w/]"),
    SpanPattern("email", r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    SpanPattern("printf_placeholder", r"%(?:\d+\$)?[-+ #0]?\d*(?:\.\d+)?[sdifuxXeEgGcp@]"),
    SpanPattern("brace_placeholder", r"\{\d+\}|\{[A-Za-z_][\w.]*\}"),
    SpanPattern("variable", r"\$\([A-Za-z_]\w*\)|\$\{[A-Za-z_]\w*\}"),
    # A function key alone too: "F8" (not the number 8).
    SpanPattern("key_combination", f"(?:(?:{MODIFIERS})\\+)+(?:{KEYS})|\\bF\\d{{1,2}}\\b"),
    # "1 000" (no-break): two words. A sign only where the word starts (after its opening
    # brackets and quotes): "-5", "+49", "(+4.3%)" keep theirs; "COVID-19" holds "19".
    SpanPattern("number", r"(?:^[+\-−])?\d+(?:[.,:']\d+)*"),
    # A word of separators only, as in menus and breadcrumbs ("Home | Help", "Tools › Options");
    # not dashes or guillemets, which a translation may rightly write in its own way.
    # The model writes no word for one, so a missing one is inserted, never put in place of
    # the output word aligned to it (a word of the text around it).
    SpanPattern("separator", r"^[|•·›‹→←⇒/\\>]+$", replaces=False),
)


# SentencePiece's piece types (sentencepiece_model.proto): pieces that write text, and bytes.
_TEXT_PIECES, _BYTE_PIECE = (1, 4), 6
# A word's characters around an unknown one: letters, marks, digits and invisible characters
# (the joiners and variation selectors of "👨‍👩‍👧" and "❤️" stay in the span).
_WORD = r"[\p{L}\p{M}\p{N}" + re2_ranges(INVISIBLE) + "]"


@functools.lru_cache(maxsize=8)
def unknown_span(model_proto: bytes) -> SpanPattern | None:
    """The row for characters the SentencePiece model `model_proto` cannot write: none of its
    pieces holds the character nor every character of its NFKC form (SentencePiece's
    normalization), so it reaches the model as unknown and never comes back ("Thanks 👍",
    a name in another script). Invisible characters are not unknown: the tokenizer removes
    them, so "spread\u200bsheet" is translated as "spreadsheet". The span is the word
    around it, letters, marks and digits included ("Привет!" -> "Привет", "naïve" where "ï"
    is unknown): the whole word the model cannot write. None for a model with byte fallback
    (it writes every character)."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(model_proto)
    if any(piece.type == _BYTE_PIECE for piece in model.pieces):
        return None
    chars = {c for p in model.pieces if p.type in _TEXT_PIECES for c in p.piece} - {"\u2581"}
    writable = [point for point in range(0x110000) if _writable(point, chars)]  # ascending
    unknown = f"[^{_ranges(writable)}]"
    return SpanPattern("unknown", f"{_WORD}*(?:{unknown}{_WORD}*)+")


def _writable(point: int, chars: set) -> bool:
    """Whether code point `point` is whitespace, written by `chars` (itself or in NFKC), or
    invisible (`tokenizer.INVISIBLE`: removed before the model reads the text)."""
    if 0xD800 <= point < 0xE000:
        return True  # surrogates: never in UTF-8 text
    if any(a <= point <= b for a, b in INVISIBLE):
        return True
    char = chr(point)
    if char in chars or char.isspace():
        return True
    normal = unicodedata.normalize("NFKC", char)
    return normal != char and all(c in chars or c.isspace() for c in normal)


def _ranges(points: list) -> str:
    """Ascending code points -> the inside of an RE2 character class (`\\x{41}-\\x{5a}...`)."""
    found, start = [], None
    for i, point in enumerate(points):
        start = point if start is None else start
        if i + 1 == len(points) or points[i + 1] != point + 1:
            found.append((start, point))
            start = None
    return re2_ranges(found)


def span_patterns(model_proto: bytes | None = None) -> tuple[SpanPattern, ...]:
    """`PATTERNS`, and with a SentencePiece model, its `unknown_span` row last."""
    unknown = unknown_span(model_proto) if model_proto else None
    return PATTERNS + ((unknown,) if unknown else ())


def span_regex(patterns=PATTERNS) -> str:
    """The alternation of every pattern, in table order (RE2 takes the leftmost match, and at
    one place the first alternative)."""
    return "|".join(f"(?:{p.pattern})" for p in patterns)


def run_regex(patterns=PATTERNS) -> str:
    """A span and the spans `JOINER` characters join to it."""
    one = span_regex(patterns)
    return f"(?:{one})(?:{JOINER}*?(?:{one}))*"


def first_spans(words, patterns=PATTERNS) -> tf.Tensor:
    """string `(n,)` words -> string `(n,)`: the first protected span in each, "" if none,
    with the spans `JOINER` characters join to it: a date, a range, two versions or two keys
    are one span ("12/05/2024", "1,000–2,000", "1.2.3/1.2.4", "Ctrl+C/Ctrl+V"), found or put
    back whole."""
    words = tf.convert_to_tensor(words, tf.string)
    regex = run_regex(patterns)
    has = tf.strings.regex_full_match(words, f"(?s).*?(?:{regex}).*")
    first = tf.strings.regex_replace(words, f"(?s)^.*?({regex}).*$", r"\1", replace_global=False)
    return tf.where(has, first, "")


def protected_words(texts, patterns=PATTERNS) -> tf.RaggedTensor:
    """string `(n,)` -> ragged string `(n, None)`: per word (`tokenizer.split_words`: also
    split at no-break and other Unicode spaces, as the model reads words), its first span or "",
    read without the word's leading and trailing quotes, brackets and sentence punctuation
    (`EDGE_PUNCTUATION`), so a whole-word row also finds its span in ">>," or "„|"; and
    without its invisible characters (as the model reads it: "1\u00ad234" holds "1234"),
    unless it holds a character of the `unknown` row, whose span keeps them verbatim."""
    return _read(texts, patterns)[1]


def _read(texts, patterns, output: bool = False) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """`protected_words`, and the words `(n, None)` it read, without invisible characters.
    A source word whose only digits sit inside a name holds no span ("BIN2HEX", "H2O": the
    German "BININHEX" is no mangled copy); an `output` word does (the model's
    "StarCalc0Tabellendokumente" is its stray of "1.0")."""
    spans = split_words(texts)  # as the model reads them: "1\u00a0000" is two
    words = remove_invisible(spans.flat_values)
    visible = tf.strings.regex_replace(words, EDGE_PUNCTUATION, "")
    unknown = [p.pattern for p in patterns if p.name == "unknown"]
    if unknown:
        as_is = tf.strings.regex_replace(spans.flat_values, EDGE_PUNCTUATION, "")
        has = tf.strings.regex_full_match(as_is, f"(?s).*?(?:{unknown[0]}).*")
        visible = tf.where(has, as_is, visible)
    first = first_spans(visible, patterns)
    if not output:
        inside = tf.strings.regex_full_match(first, r"\d+") & tf.strings.regex_full_match(
            visible, r"(?s)\D*\pL\d+\pL\D*"
        )  # the word's only digits, inside a name
        first = tf.where(inside, "", first)
    return spans.with_flat_values(words), spans.with_flat_values(first)


def _number_keys(spans, words, output: bool) -> tf.Tensor:
    """string `(k,)` spans and their words -> `(k, 2)`: two keys for a number (or a range of
    them) in the styles of `_STYLED_NUMBER`, "" where none: "\x01" and the span with each
    separator before a digit written "." ("1,000.5", "1.000,5", "1'000.5", "1 000,5":
    "\x011.000.5"), and for a whole number "\x02" and its digits ("1,000", "1.000",
    "1 000", "1000": "\x021000"; of the `output`, not "2,021" or "6 000"). The "\x01" and
    "\x02" keep keys apart from each other and from any span's own text. No keys for an
    `output` word with a letter next to a digit ("(II8,7)" is no copy of "8.7"; a formula's
    "=RUNDEN(2,348;2)" has keys; a source's "4.0pt" too)."""
    dotted = tf.strings.regex_replace(spans, f"{NUMBER_SEPARATOR}(\\d)", r".\1")
    numeric = tf.strings.regex_full_match(spans, _NUMERIC)
    whole = tf.strings.regex_full_match(spans, _WHOLE)
    if output:
        lettered = tf.strings.regex_full_match(words, r"(?s).*(?:\pL\d|\d\pL).*")
        numeric &= ~lettered
        whole &= ~lettered & ~tf.strings.regex_full_match(spans, _FOUR_IN_GROUPS)
    digits = tf.strings.regex_replace(spans, NUMBER_SEPARATOR, "")
    return tf.stack([tf.where(numeric, tf.strings.join(["\x01", dotted]), ""),
                     tf.where(whole, tf.strings.join(["\x02", digits]), "")], axis=1)  # fmt: skip


def _date_keys(spans) -> tf.Tensor:
    """string `(k,)` spans -> `(k, 2)`: a date's keys in the orders of `_DATES` and, for one
    written with "/", month first ("\x042001-2-28" for "2001-02-28", "28.02.2001" and
    "02/28/2001"), "" where none."""

    def key(pattern, template):
        return tf.where(tf.strings.regex_full_match(spans, pattern),
                        tf.strings.regex_replace(spans, f"^{pattern}$", template), "")  # fmt: skip

    (iso, day_first), month_first = (key(*row) for row in _DATES), key(*_MONTH_FIRST)
    return tf.stack([tf.where(iso != "", iso, day_first), month_first], axis=1)


def _word_keys(words, spans, output: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
    """`_read`'s words and spans, ragged `(n, W)` -> string `(W_all, 7)`: each word's keys
    (its span itself, a key combination by its keys: `_key_names`; the `_number_keys` of its
    span and of the number its word group writes; its `_date_keys`),
    and bool `(W_all,)`: the word continues the number of the word before it. French and SI
    write a number's groups of three digits as words: "1 000 000", "12 500,5"; a group follows
    a word of one to three digits (after opening brackets and a sign) with nothing after them.
    `output`: the words are the model's."""
    flat = words.flat_values
    rows = words.value_rowids()
    leads = tf.strings.regex_full_match(flat, f"{EDGE_OPENING}*{_SIGN}\\d{{1,3}}")
    group = tf.strings.regex_full_match(flat, f"\\d{{3}}(?:[.,]\\d+)?{PLACE_PUNCTUATION}")
    after_lead = tf.concat([[False], leads[:-1] & tf.equal(rows[:-1], rows[1:])], 0)
    continues = group & after_lead  # (W_all,)
    number = _group_index(continues)
    joined = tf.strings.unsorted_segment_join(
        spans.flat_values, number, tf.size(flat, out_type=tf.int64), separator=" "
    )
    own = _number_keys(spans.flat_values, flat, output)
    grouped = _number_keys(tf.gather(joined, number), flat, output)
    named = _key_names(spans.flat_values)[:, None]
    dates = _date_keys(spans.flat_values)
    return tf.concat([named, own, grouped, dates], axis=1), continues


def _key_names(spans) -> tf.Tensor:
    """string `(k,)` spans -> `(k,)`: a key combination (a span with a modifier and "+") as
    the set of its modifiers and its other keys in order, each by its row of `KEY_NAMES`, in
    lower case ("Strg+Umschalt+Eingabe", "Ctrl+Maj+Entrée" and "Shift+Ctrl+Enter" are all
    "\x03ctrl+shift+enter"; "Ctrl+C/Ctrl+V": "\x03ctrl+c/v"), the other spans as they are.
    The "\x03" keeps these keys apart from any span's own text."""
    at = tf.where(tf.strings.regex_full_match(spans, f"(?s).*(?:{MODIFIERS})\\+.*"))  # (c, 1)
    combinations = tf.gather_nd(spans, at)  # (c,): few of the words
    parts = tf.strings.split(
        tf.strings.regex_replace(combinations, f"({JOINER})", "\x00\\1\x00"), "\x00"
    )  # (c, P): names and the characters between them
    parts = parts.with_flat_values(tf.strings.lower(parts.flat_values, encoding="utf-8"))
    row = _key_rows(parts.flat_values)  # (P_all,)
    keys = tf.constant([key for key, _ in KEY_NAMES])
    written = tf.where(row >= 0, tf.gather(keys, tf.maximum(row, 0)), parts.flat_values)
    modifier = (row >= 0) & (row < len(MODIFIER_NAMES))
    held = tf.math.unsorted_segment_max(
        tf.one_hot(tf.where(modifier, row, len(MODIFIER_NAMES)), len(MODIFIER_NAMES) + 1),
        parts.value_rowids(),
        tf.shape(combinations, out_type=tf.int64)[0],
    )[:, :-1]  # (c, M): the modifiers each combination holds
    modifiers = tf.strings.reduce_join(
        tf.where(held > 0, tf.constant([f"{key}+" for key, _ in MODIFIER_NAMES])[None, :], ""),
        axis=1,
    )  # (c,): in the table's order
    kept = parts.with_flat_values(~modifier & (parts.flat_values != "+"))
    rest = tf.ragged.boolean_mask(parts.with_flat_values(written), kept)  # the other keys
    named = tf.strings.join(["\x03", modifiers, tf.strings.reduce_join(rest, axis=1)])
    return tf.tensor_scatter_nd_update(spans, at, named)


def _key_rows(names) -> tf.Tensor:
    """string `(p,)` lower-case names -> int32 `(p,)`: each name's row of `KEY_NAMES`, -1 for
    none. By 62-bit fingerprints, sorted: a binary search, not a p x names comparison."""
    table = [(name.lower(), r) for r, (_, row) in enumerate(KEY_NAMES) for name in row.split()]
    hashes = tf.strings.to_hash_bucket_fast([name for name, _ in table], 2**62)
    order = tf.argsort(hashes)
    known = tf.gather(hashes, order)  # (names,) ascending
    rows = tf.gather(tf.constant([r for _, r in table]), order)
    wanted = tf.strings.to_hash_bucket_fast(names, 2**62)  # (p,)
    at = tf.minimum(tf.searchsorted(known, wanted), len(table) - 1)
    return tf.where(tf.equal(tf.gather(known, at), wanted), tf.gather(rows, at), -1)


def _group_index(continues) -> tf.Tensor:
    """bool `(W_all,)` whether each word continues the number before it -> int64 `(W_all,)`:
    the index of the word group (`_word_keys`) each word belongs to."""
    return tf.cumsum(tf.cast(~continues, tf.int64)) - 1


def _columns(ragged: tf.RaggedTensor) -> tf.Tensor:
    """int64 `(all_values,)`: each flat value's place in its row."""
    rows = ragged.value_rowids()
    return tf.range(tf.size(rows, out_type=tf.int64)) - tf.gather(ragged.row_starts(), rows)


def _kinds(spans, patterns) -> tf.Tensor:
    """string `(k,)` spans (`first_spans`' runs) -> int32 `(k,)`: the row of `patterns` its
    first span matched (earlier rows win, as in `span_regex`); `len(patterns)` for ""."""
    starts = tf.stack(
        [tf.strings.regex_full_match(spans, f"(?s)(?:{p.pattern}).*") for p in patterns]
        + [tf.ones_like(spans, tf.bool)]
    )  # (P + 1, k)
    return tf.cast(tf.argmax(tf.cast(starts, tf.int32), axis=0), tf.int32)


def _ranks(keys) -> tf.Tensor:
    """int64 `(k,)` -> int64 `(k,)`: how many earlier entries hold the same key."""
    order = tf.argsort(keys, stable=True)
    _, group = tf.unique(tf.gather(keys, order))
    positions = tf.range(tf.size(keys, out_type=tf.int64))
    in_group = positions - tf.gather(tf.math.segment_min(positions, group), group)
    return tf.scatter_nd(order[:, None], in_group, tf.shape(keys))


def _matched(keys, rows, other_keys, other_rows) -> tuple[tf.Tensor, tf.Tensor]:
    """string `(k, K)` keys of k words (`_word_keys`) and int64 `(k,)` their sentences,
    the other side's `(j, K)` and `(j,)` -> bool `(k,)` and `(j,)`: a key of the word ("":
    none) equals a key of a word of the other side in the same sentence. One `unique` over
    (sentence, key) of both sides answers both, not k x j comparisons."""

    def pairs(keys, rows):  # (k, K) -> (kK,): "sentence\x00key"
        sentence = tf.strings.as_string(tf.repeat(rows, tf.shape(keys)[1]))
        return tf.strings.join([sentence, tf.reshape(keys, [-1])], separator="\x00")

    mine, other = pairs(keys, rows), pairs(other_keys, other_rows)
    _, ids = tf.unique(tf.concat([mine, other], 0))
    theirs = tf.concat([tf.zeros_like(mine, tf.int32), tf.ones_like(other, tf.int32)], 0)
    in_other = tf.math.unsorted_segment_max(theirs, ids, tf.size(ids))  # per distinct pair
    in_mine = tf.math.unsorted_segment_max(1 - theirs, ids, tf.size(ids))
    n = tf.size(mine)

    def found(held, ids, keys):  # (k, K) -> (k,)
        return tf.reduce_any((tf.reshape(tf.gather(held, ids), tf.shape(keys)) > 0) & (keys != ""),
                             axis=1)  # fmt: skip

    return found(in_other, ids[:n], keys), found(in_mine, ids[n:], other_keys)


def _strays(output, rows, known, continues, patterns):
    """`protected_words` of the outputs `(n, TW')` and int64 `(TW_all,)` their sentences,
    whether each output word's span is the source's (`_matched`) and continues a number
    (`_word_keys`) -> the model's strays: output words holding a span that no source word
    of their sentence holds (its mangled copy of a missing one: "(0/30/112,5/2012)." for
    "03/15/2012", "$0,00" for "$15,000"; "1 500" for "1,000" is one, its first word). int64
    `(s,)` key (sentence, row of `patterns`, rank among the sentence's strays of that row),
    int64 `(s,)` the stray's flat index."""
    kind = _kinds(output.flat_values, patterns)
    stray = (output.flat_values != "") & ~known & ~continues & _replacing(kind, patterns)
    stray = tf.where(stray)[:, 0]
    key = _key(tf.gather(rows, stray), tf.gather(kind, stray), len(patterns))
    return key + _ranks(key), stray


def _replacing(kind, patterns) -> tf.Tensor:
    """int32 `(k,)` rows of `patterns` -> bool `(k,)`: the row's missing spans replace a word."""
    return tf.gather(tf.constant([p.replaces for p in patterns] + [False]), kind)


def _key(row, kind, n_patterns: int) -> tf.Tensor:
    """(sentence, pattern row) as one int64, leaving room for a rank below 2**31."""
    return (tf.cast(row, tf.int64) * (n_patterns + 1) + tf.cast(kind, tf.int64)) * 2**31


def _claims(sources, translations, links, patterns):
    """Each missing span: (its text, its sentence, the output word it replaces or -1, the
    insertion slot after which it goes: 0 = before the first word, its source word, whether
    the word it replaces is a stray).

    The word a missing span replaces: the model's stray of the same row, where it wrote one
    (`_strays`; the k-th missing span of a row in a sentence takes the k-th stray of that row,
    both in word order), else the first output word aligned to its source word."""
    source_words, spans = _read(sources, patterns)  # (n, SW)
    output_words, output = _read(translations, patterns, output=True)  # (n, TW')
    source_keys, _ = _word_keys(source_words, spans)  # (SW_all, 7)
    output_keys, continues = _word_keys(output_words, output, output=True)  # (TW_all, 7)
    rows = spans.value_rowids()  # (total_source_words,)
    column = _columns(spans)
    output_rows, output_columns = output.value_rowids(), _columns(output)
    copied, known = _matched(source_keys, rows, output_keys, output_rows)
    # (total_source_words,): the model already wrote it, maybe in its own locale;
    # (total_output_words,): a source word of the sentence holds it
    missing = tf.where(tf.not_equal(spans.flat_values, "") & ~copied)[:, 0]  # (m,)
    text = tf.gather(spans.flat_values, missing)
    row, source_word = tf.gather(rows, missing), tf.cast(tf.gather(column, missing), tf.int32)
    links = tf.cast(links, tf.int32)  # (n, TW)
    own = tf.equal(tf.gather(links, row), source_word[:, None])  # (m, TW)
    width = tf.shape(links)[1]
    positions = tf.range(width)[None, :]  # (1, TW)
    first_own = tf.reduce_min(tf.where(own, positions, width), axis=1)  # (m,)
    before = (tf.gather(links, row) < source_word[:, None]) & (tf.gather(links, row) >= 0)
    after_word = tf.maximum(tf.reduce_max(tf.where(before, positions, -1), axis=1), -1)
    kind = _kinds(text, patterns)
    replacing = _replacing(kind, patterns)
    key = _key(row, kind, len(patterns))
    key += _ranks(key)
    stray_keys, stray_flat = _strays(output, output_rows, known, continues, patterns)
    stray_words = tf.cast(tf.gather(output_columns, stray_flat), tf.int32)
    order = tf.argsort(stray_keys)
    sorted_keys = tf.concat([tf.gather(stray_keys, order), [tf.int64.max]], 0)  # a sentinel
    at = tf.searchsorted(sorted_keys, key)  # (m,)
    by_stray = tf.equal(tf.gather(sorted_keys, at), key) & replacing
    stray = tf.where(by_stray, tf.gather(tf.concat([tf.gather(stray_words, order), [-1]], 0), at),
                     -1)  # fmt: skip
    aligned = tf.where(replacing & (first_own < width), first_own, -1)
    replaces = tf.where(stray >= 0, stray, aligned)
    dropped = _dropped(tf.gather(tf.gather(stray_flat, order), tf.boolean_mask(at, by_stray)),
                       continues, known, output_rows, output_columns)  # fmt: skip
    return text, row, replaces, after_word + 1, source_word, stray >= 0, dropped


def _dropped(replaced, continues, known, rows, columns) -> tf.Tensor:
    """int64 `(r,)` flat indices of the output words a span replaces as strays, and per
    output word whether it continues a number, is the source's, its sentence and its place
    -> int64 `(d, 2)`: (sentence, word) of the words that continue their numbers ("500" of
    "1 500"), now written by the span, unless the source holds them."""
    group = _group_index(continues)  # (TW_all,)
    taken = tf.scatter_nd(tf.gather(group, replaced)[:, None], tf.ones_like(replaced),
                          tf.shape(group, out_type=tf.int64))  # fmt: skip
    drop = tf.where(continues & ~known & (tf.gather(taken, group) > 0))[:, 0]
    return tf.stack([tf.gather(rows, drop), tf.gather(columns, drop)], axis=1)


def _replaced(words, spans, strayed, patterns) -> tf.Tensor:
    """string `(k,)` output words, the spans put in their place, and bool `(k,)` whether the
    word is a stray (`_strays`) -> `(k,)`: each span with the word's opening brackets and quotes
    and its trailing punctuation; in a stray whose span has no letter or digit after it, and
    none before it or an opening bracket, "=" or ";" just before it, with everything around it
    instead (a currency sign or "%" the model wrote: "$0,00" -> "$15,000"; a formula's
    function: "=RUNDEN(2,348;2)" -> "=RUNDEN(2.348;2)"; but "12.M5BM." -> "12.5.")."""
    opening = tf.strings.regex_replace(words, f"(?s)^({PLACE_OPENING}).*$", r"\1")
    ending = tf.strings.regex_replace(words, f"(?s)^.*?({PLACE_PUNCTUATION})$", r"\1")
    run = run_regex(patterns)  # read as `protected_words` reads: after the opening brackets
    lead = tf.strings.regex_replace(words, f"(?s)^({EDGE_OPENING}*).*$", r"\1")
    body = tf.strings.regex_replace(words, f"^{EDGE_OPENING}+", "")
    before = tf.strings.join(
        [lead, tf.strings.regex_replace(body, f"(?s)^(.*?)(?:{run}).*$", r"\1")]
    )
    after = tf.strings.regex_replace(body, f"(?s)^.*?(?:{run})(.*)$", r"\1")
    plain = r"(?s)[^\p{L}\p{N}]*"
    call = tf.strings.regex_full_match(before, r"(?s).*[(\[{=;]")  # "=RUNDEN(2,348;2)"
    around = (
        strayed
        & (tf.strings.regex_full_match(before, plain) | call)
        & (tf.strings.regex_full_match(after, plain))
    )  # (k,): a sign or punctuation only after the stray's span, and before it or a call
    return tf.where(around, tf.strings.join([before, spans, after]),
                    tf.strings.join([opening, spans, ending]))  # fmt: skip


def restore_spans(sources, translations, links, patterns=PATTERNS, with_links: bool = False):
    """string `(n,)` sentences and their translations, int32 `(n, TW)` links (the source word
    of each output word, -1: none) -> string `(n,)` translations with every protected span
    of the source present (see the module docstring). TF ops only. `with_links`: also
    ragged int32 `(n, None)`, per output word of the result, the source word of the span
    put there, -1 for the model's own words (a second alignment pass knows no better)."""
    sources = tf.convert_to_tensor(sources, tf.string)
    translations = tf.convert_to_tensor(translations, tf.string)
    words = tf.strings.split(translations)  # (n, TW)
    text, row, replaces, slot, source_word, by_stray, dropped = _claims(
        sources, translations, links, patterns
    )
    counts = words.row_lengths()  # (n,)
    sizes = 2 * counts + 1  # slot 0, word 0, slot 1, ..., word TW-1, slot TW
    offsets = tf.cumsum(sizes, exclusive=True)  # (n,)
    total = tf.reduce_sum(sizes)
    row_base = tf.gather(offsets, row)
    inserted = replaces < 0
    # Each span's part: the slot it is inserted at, or the output word it replaces.
    part = tf.where(inserted, row_base + 2 * tf.cast(slot, tf.int64),
                    row_base + 2 * tf.cast(replaces, tf.int64) + 1)  # fmt: skip

    def place(values) -> tuple[tf.Tensor, tf.Tensor]:
        """string `(m,)`, one per span -> `(total,)` twice, joined with " " at each part: of
        the inserted spans, and of the replacing ones."""
        return tuple(
            tf.strings.unsorted_segment_join(tf.boolean_mask(values, mask),
                                             tf.boolean_mask(part, mask), total, separator=" ")
            for mask in (inserted, ~inserted)
        )  # fmt: skip

    inserts, replaced = place(text)  # texts to insert at each slot, to replace each word
    word_slots = tf.gather(offsets, words.value_rowids()) + 2 * _columns(words) + 1
    flat = tf.scatter_nd(word_slots[:, None], words.flat_values, [total])  # (total,)
    gone = tf.gather(offsets, dropped[:, 0]) + 2 * dropped[:, 1] + 1  # (d,): their parts
    flat = tf.tensor_scatter_nd_update(flat, gone[:, None], tf.fill(tf.shape(gone), ""))
    strayed = tf.math.unsorted_segment_max(
        tf.cast(by_stray & ~inserted, tf.int32), part, total
    )  # (total,): > 0 where a span replaces a stray
    at = tf.where(tf.strings.length(replaced) > 0)  # (r, 1): the replaced words
    flat = tf.tensor_scatter_nd_update(flat, at, _replaced(
        tf.gather_nd(flat, at), tf.gather_nd(replaced, at), tf.gather_nd(strayed, at) > 0,
        patterns))  # fmt: skip
    flat = tf.strings.join([flat, inserts])  # a slot holds "" or its inserts, a word no insert
    all_parts = tf.RaggedTensor.from_row_lengths(flat, sizes)
    parts = tf.ragged.boolean_mask(all_parts, tf.strings.length(all_parts) > 0)
    rebuilt = tf.strings.reduce_join(parts, axis=1, separator=" ")
    changed = tf.math.unsorted_segment_sum(tf.ones_like(row), row, tf.size(translations)) > 0
    restored = tf.where(changed, rebuilt, translations)  # untouched outputs keep their spacing
    if not with_links:
        return restored
    # The same parts with each word's source word in place of its text: a span's, or -1.
    at_slot, at_word = place(tf.strings.as_string(source_word))
    own = tf.scatter_nd(word_slots[:, None], tf.fill(tf.shape(words.flat_values), "-1"), [total])
    flat = tf.strings.join([tf.where(tf.strings.length(at_word) > 0, at_word, own), at_slot])
    numbers = tf.strings.split(
        tf.strings.reduce_join(tf.ragged.boolean_mask(
            tf.RaggedTensor.from_row_lengths(flat, sizes), tf.strings.length(all_parts) > 0
        ), axis=1, separator=" ")
    )  # fmt: skip
    return restored, tf.strings.to_number(numbers, tf.int32)
