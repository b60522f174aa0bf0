"""Shared source-target subword vocabulary: trained with `sentencepiece` (BPE), applied in-graph
with `tensorflow_text.SentencepieceTokenizer`, so the same tokenizer travels inside the
SavedModel (stock TF Serving links the SentencePiece ops).

Ids: 0 pad, 1 unk, 2 bos, 3 eos (`keras_transformer.constants`, read by the model too).

    train_sentencepiece(texts, "runs/spm", vocab_size=8000)  # writes runs/spm.model
    tokenizer = SubwordTokenizer.from_file("runs/spm.model")
    ids = tokenizer.tokenize(tf.constant(["Hello world"]))     # ragged int32 (batch, None)
    text = tokenizer.detokenize(dense_ids)                      # string (batch,)

Invisible characters (`INVISIBLE`: soft hyphens, zero-width spaces, word joiners, bidi marks,
byte-order marks, variation selectors, C0/C1 controls) are removed before SentencePiece, in
training and at inference alike: a reader does not see them, so neither does the model.
SentencePiece's own normalization read some as a space, splitting the word they sit in
("spread\u200bsheet"), and others as unknown pieces.
"""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterable

import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID

logger = logging.getLogger("keras_transformer")


def re2_ranges(ranges) -> str:
    """Inclusive `(first, last)` code point pairs -> the inside of an RE2 character class
    (`\\x{41}-\\x{5a}\\x{ad}...`)."""
    return "".join(f"\\x{{{a:x}}}" + (f"-\\x{{{b:x}}}" if b > a else "") for a, b in ranges)


# Unicode's Default_Ignorable_Code_Point (format characters a renderer shows as nothing),
# less U+200C ZERO WIDTH NON-JOINER (in Persian and Indic text it parts a word, and
# SentencePiece reads it as a word boundary) and the Hangul fillers (letters of conjoining
# jamo); and the C0 and C1 controls that are not whitespace. Inclusive ranges of code points.
INVISIBLE = (
    (0x00, 0x08), (0x0E, 0x1F), (0x7F, 0x84), (0x86, 0x9F), (0xAD, 0xAD), (0x34F, 0x34F),
    (0x61C, 0x61C), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200B), (0x200D, 0x200F),
    (0x202A, 0x202E), (0x2060, 0x206F), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
INVISIBLE_RE2 = f"[{re2_ranges(INVISIBLE)}]"
_INVISIBLE_PYTHON = re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in INVISIBLE) + "]")


# Characters SentencePiece's normalization (`nmt_nfkc`) reads as a word boundary where
# `tf.strings.split` (ASCII whitespace) does not: Unicode's spaces, the no-break ones too (a
# no-break space keeps two words on one line; they stay two words), line and paragraph
# separators, and U+200C ZERO WIDTH NON-JOINER. Inclusive ranges of code points.
SPACES = (
    (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x200C, 0x200C), (0x2028, 0x2029),
    (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
)  # fmt: skip
SPACES_RE2 = f"[{re2_ranges(SPACES)}]"


def split_words(texts) -> tf.RaggedTensor:
    """string `(n,)` -> ragged string `(n, None)`: the words as the model reads them (each
    begins a SentencePiece word, "\u2581..."): split at ASCII whitespace and at `SPACES`,
    less those of `INVISIBLE` characters only (the tokenizer removes them). `markup.tag_words`
    counts words by the same rule on text with tag marks: change both together."""
    texts = tf.convert_to_tensor(texts, tf.string)
    words = tf.strings.split(tf.strings.regex_replace(texts, SPACES_RE2, " "))
    visible = tf.strings.length(remove_invisible(words.flat_values)) > 0
    return tf.ragged.boolean_mask(words, words.with_flat_values(visible))


def remove_invisible(texts) -> tf.Tensor:
    """string `(...)` -> the same texts without `INVISIBLE` characters (TF ops)."""
    return tf.strings.regex_replace(texts, INVISIBLE_RE2, "")


def remove_invisible_text(text: str) -> str:
    """`remove_invisible` for one Python string: for SentencePiece used outside the graph
    (CTranslate2, `train_sentencepiece`), so it reads what the model reads."""
    return _INVISIBLE_PYTHON.sub("", text)


def train_sentencepiece(
    texts: Iterable[str],
    model_path: str,
    vocab_size: int,
    model_type: str = "bpe",
    character_coverage: float = 1.0,
    max_sentences: int = 2_000_000,
) -> str:
    """Train a SentencePiece model on `texts` (source and target sentences together).

    Args:
        texts: sentences; a shared vocabulary is trained on both languages.
        model_path: where to write the model (a `.model` file).
        vocab_size: number of pieces, the four special ids included.
        model_type: "bpe" (paper) or "unigram".
        character_coverage: share of characters covered by the vocabulary.
        max_sentences: sentences sampled for training (`input_sentence_size`).

    Returns:
        `model_path`.
    """
    import sentencepiece as spm

    if not isinstance(vocab_size, int) or vocab_size <= 4:
        raise ValueError(f"vocab_size must be an int > 4. Received: vocab_size={vocab_size!r}")
    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=(c for c in map(remove_invisible_text, texts) if c),
        model_writer=proto,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        input_sentence_size=max_sentences,
        shuffle_input_sentence=True,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    os.makedirs(os.path.dirname(os.path.abspath(model_path)), exist_ok=True)
    with open(model_path, "wb") as f:
        f.write(proto.getvalue())
    logger.info(
        "Trained a %s SentencePiece model (%d pieces): %s", model_type, vocab_size, model_path
    )
    return model_path


class SubwordTokenizer(tf.Module):
    """In-graph SentencePiece tokenizer with the project's id conventions.

    Args:
        model_proto: the serialized SentencePiece model (bytes of a `.model` file).
    """

    def __init__(self, model_proto: bytes, name: str | None = None):
        super().__init__(name=name)
        if not model_proto:
            raise ValueError("model_proto is empty: expected the bytes of a SentencePiece model.")
        self.model_proto = model_proto
        self.sentencepiece = tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.int32)

    @classmethod
    def from_file(cls, path: str) -> SubwordTokenizer:
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"No SentencePiece model at {path!r}")
        with tf.io.gfile.GFile(path, "rb") as f:
            return cls(f.read())

    def _op(self, name, *args):
        """Call a SentencePiece method; rebuild the eager resource if TF dropped it.

        `tf.random.set_seed` (so `keras.utils.set_random_seed`) clears the eager kernel cache,
        which deletes a SentencePiece resource created eagerly before it.
        """
        try:
            return getattr(self.sentencepiece, name)(*args)
        except tf.errors.NotFoundError:
            if not tf.executing_eagerly():
                raise
            self.sentencepiece = tf_text.SentencepieceTokenizer(
                model=self.model_proto, out_type=tf.int32
            )
            return getattr(self.sentencepiece, name)(*args)

    @property
    def vocab_size(self) -> int:
        return int(self._op("vocab_size"))

    def tokenize(self, texts) -> tf.RaggedTensor:
        """Strings `(batch,)` -> ragged int32 ids `(batch, None)`, without BOS/EOS, read
        without their `INVISIBLE` characters."""
        return self._op("tokenize", remove_invisible(texts))

    def detokenize(self, ids) -> tf.Tensor:
        """Int ids `(batch, len)` -> strings `(batch,)`.

        Everything from the first EOS on is dropped, as are PAD and BOS tokens.
        """
        ids = tf.cast(ids, tf.int32)
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)
        keep = before_eos & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, BOS_ID)
        return self._op("detokenize", tf.ragged.boolean_mask(ids, keep))

    def encode_source(self, texts, max_length: int) -> tf.RaggedTensor:
        """Source ids `(batch, None)`: pieces truncated to `max_length - 1`, then EOS."""
        pieces = self.tokenize(texts)[:, : max_length - 1]
        eos = tf.fill([pieces.nrows(), 1], EOS_ID)
        return tf.concat([pieces, tf.RaggedTensor.from_tensor(eos)], axis=1)
