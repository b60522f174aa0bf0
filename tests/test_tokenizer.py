"""The shared SentencePiece vocabulary: special ids, in-graph round trip, truncation, and
survival of a reseed (which clears TF's eager resources)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from keras_transformer.data.tokenizer import (
    BOS_ID,
    EOS_ID,
    INVISIBLE,
    PAD_ID,
    UNK_ID,
    SubwordTokenizer,
    remove_invisible,
    remove_invisible_text,
    split_words,
    train_sentencepiece,
)
from keras_transformer.tracing import graph_function

TEXTS = [f"the {w} house number {i} is {c}" for i in range(60) for w, c in
         (("small", "red"), ("big", "blue"), ("old", "grün"))]  # fmt: skip


@pytest.fixture()
def model_path(tmp_path):
    return train_sentencepiece(TEXTS, str(tmp_path / "spm.model"), vocab_size=60)


def test_special_ids_and_bpe(model_path):
    processor = spm.SentencePieceProcessor(model_file=model_path)
    assert processor.pad_id() == PAD_ID and processor.unk_id() == UNK_ID
    assert processor.bos_id() == BOS_ID and processor.eos_id() == EOS_ID
    assert processor.vocab_size() == 60
    tokenizer = SubwordTokenizer.from_file(model_path)
    assert tokenizer.vocab_size == 60


def test_in_graph_ids_equal_python_sentencepiece_and_round_trip(model_path):
    processor = spm.SentencePieceProcessor(model_file=model_path)
    tokenizer = SubwordTokenizer.from_file(model_path)
    texts = ["the small house is red", "number 12 is grün", ""]
    ids = tokenizer.tokenize(tf.constant(texts)).to_list()
    assert ids == [processor.encode(t) for t in texts]

    @graph_function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(strings):
        return tokenizer.detokenize(tokenizer.tokenize(strings).to_tensor())

    assert [s.decode() for s in round_trip(tf.constant(texts)).numpy()] == texts


def test_detokenize_stops_at_eos_and_drops_pad_and_bos(model_path):
    tokenizer = SubwordTokenizer.from_file(model_path)
    pieces = tokenizer.tokenize(tf.constant(["the big house"])).to_list()[0]
    noise = tokenizer.tokenize(tf.constant(["is red"])).to_list()[0]
    row = [BOS_ID] + pieces + [EOS_ID] + noise + [PAD_ID, PAD_ID]
    assert tokenizer.detokenize(tf.constant([row])).numpy()[0].decode() == "the big house"


def test_encode_source_truncates_and_appends_eos(model_path):
    tokenizer = SubwordTokenizer.from_file(model_path)
    long_text = " ".join(TEXTS[:20])
    ids = tokenizer.encode_source(tf.constant([long_text, ""]), max_length=8).to_list()
    full = tokenizer.tokenize(tf.constant([long_text])).to_list()[0]
    assert ids[0] == full[:7] + [EOS_ID]
    assert ids[1] == [EOS_ID]


def test_tokenizer_survives_reseeding(model_path):
    tokenizer = SubwordTokenizer.from_file(model_path)
    before = tokenizer.tokenize(tf.constant(["the old house"])).to_list()
    keras.utils.set_random_seed(7)  # clears TF's eager kernel cache
    assert tokenizer.tokenize(tf.constant(["the old house"])).to_list() == before
    np.testing.assert_array_equal(
        tokenizer.detokenize(tf.constant(before)).numpy(), [b"the old house"]
    )


def test_bad_arguments_name_the_value(tmp_path):
    with pytest.raises(ValueError, match="vocab_size=3"):
        train_sentencepiece(TEXTS, str(tmp_path / "x.model"), vocab_size=3)
    with pytest.raises(FileNotFoundError, match="missing.model"):
        SubwordTokenizer.from_file(str(tmp_path / "missing.model"))


def test_invisible_characters_are_removed_before_sentencepiece(tmp_path):
    """Every code point of `INVISIBLE`, put inside and around words, leaves the ids of the
    text without it (SentencePiece alone reads a zero-width space as a word boundary and a
    word joiner as unknown); the graph's and Python's removal agree on every code point; and
    a vocabulary trained on text holding soft hyphens has no piece for them."""
    points = [p for a, b in INVISIBLE for p in range(a, b + 1)]
    everything = "".join(chr(p) for p in range(0x110000) if not 0xD800 <= p < 0xE000)
    in_graph = remove_invisible(tf.constant([everything.encode("utf-8")])).numpy()[0]
    assert in_graph.decode("utf-8") == remove_invisible_text(everything)
    assert len(everything) - len(remove_invisible_text(everything)) == len(points)
    assert "\u200c" in remove_invisible_text("\u200c")  # ZWNJ parts Persian and Indic words

    model_path = train_sentencepiece(
        [t.replace("house", "hou\u00adse") for t in TEXTS], str(tmp_path / "spm.model"), 60
    )
    processor = spm.SentencePieceProcessor(model_file=model_path)
    assert all("\u00ad" not in processor.id_to_piece(i) for i in range(60))
    tokenizer = SubwordTokenizer.from_file(model_path)
    clean = tokenizer.tokenize(tf.constant(["the small house is red"])).to_list()[0]
    texts = [f"{chr(p)}the small hou{chr(p)}se is{chr(p)} red{chr(p)}" for p in points]
    got = tokenizer.tokenize(tf.constant(texts)).to_list()
    assert [chr(p) for p, ids in zip(points, got) if ids != clean] == []
    assert processor.encode("the small hou\u200bse is red") != clean  # what it was before


def test_split_words_are_the_words_sentencepiece_reads(model_path):
    """The words of `split_words` are SentencePiece's own (a piece beginning with "\u2581"
    starts one) on random texts of letters, unknown characters, ASCII and Unicode spaces
    (no-break ones too) and invisible characters: the reference is SentencePiece itself."""
    import random

    processor = spm.SentencePieceProcessor(model_file=model_path)
    pool = (list("thesmaluobigrdn") * 3 + list("東👍") + [" ", "  ", "\t", "\n"]
            + ["\u00a0", "\u2002", "\u2009", "\u200c", "\u202f", "\u3000", "\u2028"]
            + ["\u00ad", "\u200b", "\ufeff", "\u2060", "\x07"])  # fmt: skip
    rng = random.Random(0)
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 30))) for _ in range(400)]
    got = split_words(tf.constant(texts)).row_lengths().numpy().tolist()
    expected = [sum(p.startswith("\u2581") for p in processor.encode(remove_invisible_text(t),
                                                                      out_type=str))
                for t in texts]  # fmt: skip
    assert got == expected
    assert tf.strings.split(tf.constant(["a\u00a0b"])).row_lengths().numpy().tolist() == [1]
