"""Checks of the strings a request sends, in TF ops (the export's signatures run them): each
fails with InvalidArgumentError (INVALID_ARGUMENT when served) and a message that names the
input and shows what is wrong.

    texts = check_size(texts, 100_000, "input", "max_input_bytes")  # (batch,), checked
    prefix = check_utf8(check_size(prefix, 2_000, "prefix"), "prefix")

- `check_size`: no string longer than `max_bytes` bytes. Every input has a limit.
- `check_utf8`: every string valid UTF-8. Only for the guides of a guided translation (a
  prefix, constraints, phrases to avoid, a glossary): they are instructions, and a prefix is
  copied into the output byte for byte, which must stay valid UTF-8. Texts to translate,
  score or align are not checked: invalid bytes in them become SentencePiece's unknown piece
  and the request is answered (BUILD.md, "Inputs never make a signature fail").
"""

from __future__ import annotations

import tensorflow as tf

REPLACEMENT = 0xFFFD  # U+FFFD REPLACEMENT CHARACTER
SHOWN = 3  # bad strings quoted in a message


def check_size(texts, max_bytes: int, name: str, setting: str | None = None) -> tf.Tensor:
    """String `texts (batch,)` after an assertion that none is longer than `max_bytes` bytes;
    the message names the input (`name`: "input", "prefix", "source", ...), the limit (and
    `setting`, the option that sets it, if any) and the lengths received."""
    texts = tf.convert_to_tensor(texts, tf.string)
    limit = f"{setting}={max_bytes}" if setting else str(max_bytes)
    check = tf.debugging.assert_less_equal(
        tf.strings.length(texts), max_bytes,
        message=f"{name} longer than {limit} bytes (UTF-8): send it in parts. Byte lengths "
        "received:",
        summarize=16,
    )  # fmt: skip
    with tf.control_dependencies([check]):
        return tf.identity(texts)


def check_utf8(texts, name: str) -> tf.Tensor:
    """String `texts (batch,)` after an assertion that each is valid UTF-8. The message gives
    the bad rows and their texts with each invalid byte sequence shown as U+FFFD (the raw
    bytes would make the error message itself invalid text)."""
    texts = tf.convert_to_tensor(texts, tf.string)
    replaced = tf.strings.unicode_transcode(
        texts, "UTF-8", "UTF-8", errors="replace", replacement_char=REPLACEMENT
    )  # (batch,): equal to texts exactly where they are valid UTF-8
    bad = tf.where(tf.not_equal(texts, replaced))[:, 0]  # (bad,) rows
    check = tf.debugging.Assert(
        tf.equal(tf.size(bad), 0),
        [f"{name} is not valid UTF-8 (rows, then their texts with each invalid byte sequence "
         "shown as U+FFFD):", bad, tf.gather(replaced, bad)],
        summarize=SHOWN,
    )  # fmt: skip
    with tf.control_dependencies([check]):
        return tf.identity(texts)
