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
    cfg = regularization.with_quick_preset_dropout(TrainingConfig.from_flat(dataset=dataset))
    assert cfg.architecture.dropout == regularization.SMALL_CORPUS_DROPOUT
    assert cfg.architecture.model_config().dropout == regularization.SMALL_CORPUS_DROPOUT


def test_the_threshold_is_source_words_below_small_corpus_words():
    limit = regularization.SMALL_CORPUS_WORDS
    assert regularization.quick_preset_dropout(limit - 1) == regularization.SMALL_CORPUS_DROPOUT
    assert regularization.quick_preset_dropout(limit) == 0.0
    assert regularization.quick_preset_dropout(0) == regularization.SMALL_CORPUS_DROPOUT


def test_the_bundled_corpus_keeps_the_presets_none():
    """The default run's corpus (sample_en_de) is above the threshold: no dropout."""
    cfg = regularization.with_quick_preset_dropout(TrainingConfig.from_flat())
    assert cfg.architecture.dropout == 0.0


@pytest.mark.parametrize("flags", [{"dropout": 0.3}, {"dropout": 0.0}, {"model": "tiny"}])
def test_a_given_dropout_or_another_preset_is_kept(corpus, flags):
    cfg = TrainingConfig.from_flat(dataset=corpus[0], **flags)
    assert regularization.with_quick_preset_dropout(cfg) == cfg


def test_counting_stops_at_the_limit(corpus):
    dataset, words = corpus
    cfg = TrainingConfig.from_flat(dataset=dataset)
    assert regularization.corpus_words(cfg, limit=10**9) == words
    counted = regularization.corpus_words(cfg, limit=50)
    assert 50 <= counted < 50 + max(len(s.split()) for s, _ in read_pairs(dataset, "train"))
