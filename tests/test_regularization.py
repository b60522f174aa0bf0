"""The quick preset's dropout by corpus size (`training.regularization`)."""

import pytest

from keras_transformer.config import TrainingConfig
from keras_transformer.data.corpus import read_pairs
from keras_transformer.testing.runs import write_tsv
from keras_transformer.training import regularization


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "pairs.tsv"
    write_tsv(path, n=120)
    words = sum(len(source.split()) for source, _ in read_pairs(f"tsv:{path}", "train"))
    return f"tsv:{path}", words


def test_a_small_corpus_gets_dropout(corpus):
    dataset, words = corpus
    assert words < regularization.SMALL_CORPUS_WORDS
    cfg = regularization.resolve(TrainingConfig.from_flat(dataset=dataset))
    assert cfg.architecture.dropout == regularization.SMALL_CORPUS_DROPOUT
    assert cfg.architecture.model_config().dropout == regularization.SMALL_CORPUS_DROPOUT


def test_a_large_corpus_keeps_the_presets_none(corpus, monkeypatch):
    dataset, words = corpus
    monkeypatch.setattr(regularization, "SMALL_CORPUS_WORDS", words)  # exactly the threshold
    cfg = regularization.resolve(TrainingConfig.from_flat(dataset=dataset))
    assert cfg.architecture.dropout == 0.0
    monkeypatch.setattr(regularization, "SMALL_CORPUS_WORDS", words + 1)
    assert regularization.resolve(TrainingConfig.from_flat(dataset=dataset)).architecture.dropout


@pytest.mark.parametrize("flags", [{"dropout": 0.3}, {"dropout": 0.0}, {"model": "tiny"}])
def test_a_given_dropout_or_another_preset_is_kept(corpus, flags):
    cfg = TrainingConfig.from_flat(dataset=corpus[0], **flags)
    assert regularization.resolve(cfg) == cfg


def test_counting_stops_at_the_limit(corpus):
    dataset, words = corpus
    cfg = TrainingConfig.from_flat(dataset=dataset)
    assert regularization.corpus_words(cfg, limit=10**9) == words
    counted = regularization.corpus_words(cfg, limit=50)
    assert 50 <= counted < 50 + max(len(s.split()) for s, _ in read_pairs(dataset, "train"))
