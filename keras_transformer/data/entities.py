"""HTML character references decoded in stock TensorFlow string ops (the export's
`translate_markup` runs it; no py_function), so that the model reads the characters a web
page means, not the letters of their names ("&nbsp;", "&mdash;", "&#8211;", "&#x2019;").

    decode_entities(tf.constant(["5&nbsp;&euro; &#8211; caf&#xE9; &amp;lt;"]))
    # -> ["5\u00a0€ – café &lt;"]: one pass, so "&amp;lt;" is the text "&lt;"

- Named references: the five of XML and the HTML ones web text uses most (`NAMED`: spaces and
  dashes, quotes, currency, marks and symbols, the Latin-1 letters); any other name stays as
  it is (text).
- Numeric references `&#NNN;` and `&#xHH;`, as HTML5 reads them: 0, surrogates and code points
  past U+10FFFF become U+FFFD, and 128-159 are the Windows-1252 characters that browsers show
  for them (`&#150;` is "–").

Only references ended by ";" are decoded. The reference for the tests is Python's
`html.unescape`.
"""

from __future__ import annotations

import unicodedata

import tensorflow as tf


def _accented_letters() -> dict[str, str]:
    """The Latin-1 letters with an accent, by the entities' naming rule: "eacute" is é."""
    accents = {"grave": "\u0300", "acute": "\u0301", "circ": "\u0302", "tilde": "\u0303",
               "uml": "\u0308"}  # fmt: skip
    letters = {}
    for accent, mark in accents.items():
        for base in "AEIOUYNaeiouyn":
            letter = unicodedata.normalize("NFC", base + mark)
            if len(letter) == 1 and 0xC0 <= ord(letter) <= 0xFF:
                letters[base + accent] = letter
    return letters


SEPARATOR = "\x1e"  # splits a text around its references (never in a parsed input)
NAMED = {
    "lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'",
    "nbsp": "\u00a0", "ensp": "\u2002", "emsp": "\u2003", "thinsp": "\u2009", "shy": "\u00ad",
    "zwnj": "\u200c", "zwj": "\u200d", "ndash": "\u2013", "mdash": "\u2014",
    "hellip": "\u2026", "bull": "\u2022", "middot": "\u00b7", "prime": "\u2032",
    "lsquo": "\u2018", "rsquo": "\u2019", "sbquo": "\u201a", "ldquo": "\u201c",
    "rdquo": "\u201d", "bdquo": "\u201e", "laquo": "\u00ab", "raquo": "\u00bb",
    "lsaquo": "\u2039", "rsaquo": "\u203a", "euro": "\u20ac", "cent": "\u00a2",
    "pound": "\u00a3", "yen": "\u00a5", "curren": "\u00a4", "copy": "\u00a9", "reg": "\u00ae",
    "trade": "\u2122", "deg": "\u00b0", "plusmn": "\u00b1", "times": "\u00d7",
    "divide": "\u00f7", "micro": "\u00b5", "para": "\u00b6", "sect": "\u00a7",
    "iexcl": "\u00a1", "iquest": "\u00bf", "ordf": "\u00aa", "ordm": "\u00ba",
    "sup1": "\u00b9", "sup2": "\u00b2", "sup3": "\u00b3", "frac14": "\u00bc",
    "frac12": "\u00bd", "frac34": "\u00be", "larr": "\u2190", "rarr": "\u2192",
    "uarr": "\u2191", "darr": "\u2193", "harr": "\u2194", "le": "\u2264", "ge": "\u2265",
    "ne": "\u2260", "minus": "\u2212", "infin": "\u221e", "dagger": "\u2020",
    "Dagger": "\u2021", "permil": "\u2030", "szlig": "\u00df", "AElig": "\u00c6",
    "aelig": "\u00e6", "Oslash": "\u00d8", "oslash": "\u00f8", "Aring": "\u00c5",
    "aring": "\u00e5", "Ccedil": "\u00c7", "ccedil": "\u00e7", "ETH": "\u00d0", "eth": "\u00f0",
    "THORN": "\u00de", "thorn": "\u00fe", "OElig": "\u0152", "oelig": "\u0153",
    "Scaron": "\u0160", "scaron": "\u0161", "Yuml": "\u0178", "yuml": "\u00ff",
    **_accented_letters(),
}  # fmt: skip

# HTML5: numeric references to 128-159 mean the Windows-1252 characters (0: kept).
WINDOWS_1252 = [0x20AC, 0, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030,
                0x0160, 0x2039, 0x0152, 0, 0x017D, 0, 0, 0x2018, 0x2019, 0x201C, 0x201D,
                0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0, 0x017E,
                0x0178]  # fmt: skip
NUMERIC = r"&#(?:[0-9]{1,8}|[xX][0-9A-Fa-f]{1,7});"
REFERENCE = f"&(?:{'|'.join(sorted(NAMED, key=len, reverse=True))});|{NUMERIC}"


def references_to(ranges) -> str:
    """RE2 matching every reference (named or numeric, as `decode_entities` reads them) to a
    code point of `ranges` (inclusive `(first, last)` pairs)."""
    points = [p for a, b in ranges for p in range(a, b + 1)]
    named = [name for name, char in NAMED.items() if ord(char[0]) in points and len(char) == 1]
    decimal = "|".join(str(p) for p in points)
    hexadecimal = "|".join(f"{p:x}" for p in points)
    return "|".join([f"&(?:{'|'.join(named)});"] * bool(named)
                    + [f"&#0*(?:{decimal});", f"&#[xX]0*(?i:{hexadecimal});"])  # fmt: skip


def decode_entities(texts) -> tf.Tensor:
    """String `(batch,)` with character references -> the same with each one decoded (see
    the module docstring), in one pass."""
    texts = tf.convert_to_tensor(texts, tf.string)
    marked = tf.strings.regex_replace(texts, f"({REFERENCE})", f"{SEPARATOR}\\1{SEPARATOR}")
    parts = tf.strings.split(marked, SEPARATOR)  # (batch, None): text, reference, text, ...
    flat = parts.flat_values
    named = tf.constant(list(NAMED.values()))
    index = tf.constant([f"&{name};" for name in NAMED])
    found = tf.equal(flat[:, None], index[None, :])  # (parts, names); no reference: none
    is_named = tf.reduce_any(found, axis=1)
    by_name = tf.gather(named, tf.argmax(tf.cast(found, tf.int32), axis=1))
    is_numeric = tf.strings.regex_full_match(flat, NUMERIC)
    by_number = _characters(tf.where(is_numeric, flat, "&#0;"))
    flat = tf.where(is_named, by_name, tf.where(is_numeric, by_number, flat))
    return tf.strings.reduce_join(parts.with_flat_values(flat), axis=1)


def escape_text(texts) -> tf.Tensor:
    """string tensor -> the same with `&`, `<` and `>` written as references (HTML reads
    every other character as itself in text)."""
    for old, new in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;")):
        texts = tf.strings.regex_replace(texts, old, new)
    return texts


def _characters(references) -> tf.Tensor:
    """Numeric references `(n,)`, each `&#NNN;` or `&#xHH;` -> their characters, UTF-8."""
    hexadecimal = tf.strings.regex_full_match(references, "&#[xX].*")
    digits = tf.strings.unicode_decode(
        tf.strings.regex_replace(references, "^&#[xX]?|;$", ""), "UTF-8"
    )  # (n, None) code points of the digits
    rows, chars = digits.value_rowids(), tf.cast(digits.flat_values, tf.int64)  # (digits,)
    values = tf.where(chars <= ord("9"), chars - ord("0"), (chars | 32) - ord("a") + 10)
    base = tf.where(hexadecimal, tf.constant(16, tf.int64), 10)  # (n,)
    place = (
        tf.gather(digits.row_lengths(), rows)
        - 1
        - tf.ragged.range(digits.row_lengths()).flat_values
    )  # (digits,): 0 for the last digit of its reference
    weights = tf.pow(tf.gather(base, rows), place)
    number = tf.math.unsorted_segment_sum(values * weights, rows, tf.size(base))  # (n,)
    windows = tf.gather(WINDOWS_1252, tf.clip_by_value(number - 0x80, 0, 31))
    number = tf.where((number >= 0x80) & (number <= 0x9F) & (windows > 0),
                      tf.cast(windows, tf.int64), number)  # fmt: skip
    invalid = (number == 0) | (number > 0x10FFFF) | ((number >= 0xD800) & (number <= 0xDFFF))
    code = tf.cast(tf.where(invalid, tf.constant(0xFFFD, tf.int64), number), tf.int32)
    return tf.strings.unicode_encode(code[:, None], "UTF-8")
