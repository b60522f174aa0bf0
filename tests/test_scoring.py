"""Teacher-forced scoring (keras_transformer.decoding.scoring) against an independent NumPy
log-softmax of the model's own logits, and against the scores beam search and sampling report
for their own outputs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import SearchOptions, artifacts
from keras_transformer.decoding import score_ids, score_pairs, translate_ids
from keras_transformer.decoding.search import sample_ids
from keras_transformer.testing.model_dir import make_model_dir

BOS, EOS = 2, 3
SOURCES = ["The cat sleeps number 3.", "", "Der Hund schläft.", "number 7 " * 40, "x"]
TARGETS = ["Die Katze schläft Nummer 3.", "Le chat", "", "Hund " * 60, "The cat"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model_dir(str(tmp_path_factory.mktemp("scoring_model")), max_length=32)


@pytest.fixture
def trained(model_dir):
    model, config, tokenizer = artifacts.load_trained(model_dir)
    eos = model.token_embedding.embeddings.numpy()[config.eos_id]  # hypotheses end early
    model.decoder.layers[-1].feed_forward_norm.beta.assign(1.5 * eos / np.linalg.norm(eos))
    return model, config, tokenizer


def _numpy_scores(model, config, tokenizer, source: str, target: str, alpha: float):
    """One pair, unpadded, through the full model; log-softmax in float64 NumPy."""
    pieces = tokenizer.tokenize(tf.constant([source, target])).to_list()
    source_ids = pieces[0][: config.max_length - 1] + [EOS]
    labels = pieces[1][: config.max_length - 1] + [EOS]
    logits = model({"source": np.array([source_ids]), "target": np.array([[BOS] + labels[:-1]])})
    logits = logits.numpy()[0].astype("f8")  # (len, vocab)
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    total = float(sum(log_probs[i, t] for i, t in enumerate(labels)))
    n = len(labels)
    return {"log_prob": total, "per_token": total / n, "score": total / ((5 + n) / 6) ** alpha}


@pytest.mark.parametrize("alpha", [0.6, 1.0])
def test_scores_equal_numpy_log_softmax_of_the_models_logits(trained, alpha):
    model, config, tokenizer = trained
    got = score_pairs(model, tokenizer, SOURCES, TARGETS, SearchOptions(alpha=alpha), batch_size=2)
    assert set(got) == {"log_prob", "per_token", "score"}
    for i, (source, target) in enumerate(zip(SOURCES, TARGETS)):  # input order kept
        want = _numpy_scores(model, config, tokenizer, source, target, alpha)
        for key, value in want.items():
            assert got[key][i] == pytest.approx(value, abs=1e-4), (i, key)
    assert got["log_prob"][0] != got["log_prob"][2]


def _rows(ids, pad=0):
    return [[t for t in row if t != pad] for row in ids.numpy().tolist()]


def test_score_of_beam_output_equals_the_beam_score(trained):
    model, config, tokenizer = trained
    source = tokenizer.encode_source(tf.constant(SOURCES[:3]), config.max_length)
    search = SearchOptions(beam_size=3, alpha=0.6, n_best=3, max_extra_length=6)
    ids, scores = translate_ids(model, source, search)  # (3, n_best, len), (3, n_best)
    lengths = {len(row) for k in range(3) for row in _rows(ids[:, k])}
    assert len(lengths) > 1  # hypotheses of several lengths, with and without EOS
    for k in range(3):
        got = score_ids(model, source, ids[:, k], alpha=0.6)
        np.testing.assert_allclose(got["score"].numpy(), scores[:, k].numpy(), atol=1e-4)
    wrong = score_ids(model, source, ids[:, 0], alpha=1.0)["score"].numpy()
    assert not np.allclose(wrong, scores[:, 0].numpy(), atol=1e-4)  # the penalty matters


def test_score_of_sampled_output_equals_the_sampling_score(trained):
    model, config, tokenizer = trained
    source = tokenizer.encode_source(tf.constant(SOURCES), config.max_length).to_tensor()
    search = SearchOptions(max_extra_length=5)
    ids, scores = sample_ids(model, source, search, "sample", top_k=5, seed=3)
    got = score_ids(model, source, ids, alpha=search.alpha)
    np.testing.assert_allclose(got["score"].numpy(), scores.numpy(), atol=1e-4)


def test_score_pairs_checks_its_arguments(trained):
    model, _, tokenizer = trained
    with pytest.raises(ValueError, match="2 sources for 1 targets"):
        score_pairs(model, tokenizer, ["a", "b"], ["c"])
    with pytest.raises(ValueError, match="batch_size"):
        score_pairs(model, tokenizer, ["a"], ["c"], batch_size=0)
    empty = score_pairs(model, tokenizer, [], [])
    assert {key: value.shape for key, value in empty.items()} == {
        "log_prob": (0,), "per_token": (0,), "score": (0,)
    }  # fmt: skip
