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
    PAD_ID,
    UNK_ID,
    SubwordTokenizer,
    train_sentencepiece,
)

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

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
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
