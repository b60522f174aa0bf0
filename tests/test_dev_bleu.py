"""BLEU while training (`keras_transformer.decoding.dev_bleu.DevBleu`): its figures against an
independent decode-and-score, best-weights keeping, early stopping, resume and the plot."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from keras_transformer import artifacts
from keras_transformer.config import SearchOptions, TrainingConfig
from keras_transformer.decoding import dev_bleu
from keras_transformer.decoding.translator import Translator
from keras_transformer.testing.model_dir import SENTENCES, make_model_dir

PAIRS = [(SENTENCES[i], SENTENCES[i + 1]) for i in range(0, 24, 2)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    directory = make_model_dir(str(tmp_path_factory.mktemp("dev_bleu") / "model"))
    model, _, tokenizer = artifacts.load_trained(directory)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    return directory, model, tokenizer


def _callback(model, tokenizer, directory, **kwargs):
    callback = dev_bleu.DevBleu(PAIRS, tokenizer, directory, every_steps=5, **kwargs)
    callback.set_model(model)
    callback.on_train_begin()
    return callback


def test_figures_match_an_independent_greedy_decode(trained, tmp_path):
    _, model, tokenizer = trained
    callback = _callback(model, tokenizer, str(tmp_path))
    record = callback.evaluate(5)
    # Reference: beam size 1 through the translator's own search, scored by sacrebleu directly.
    hypotheses, _ = Translator(model, tokenizer, SearchOptions(beam_size=1)).translate(
        [source for source, _ in PAIRS]
    )
    expected = BLEU().corpus_score(hypotheses, [[target for _, target in PAIRS]]).score
    assert record["step"] == 5 and record["bleu"] == pytest.approx(expected, abs=0.005)
    assert callback.search.beam_size == 1
    assert json.loads((tmp_path / dev_bleu.DEV_BLEU_FILE).read_text()) == [record]
    assert (tmp_path / dev_bleu.CURVE_FILE).stat().st_size > 5000  # a drawn PNG
    assert os.listdir(tmp_path / artifacts.LOG_DIR / "dev_bleu")  # TensorBoard events


def test_keep_best_and_early_stopping(trained, tmp_path):
    _, model, tokenizer = trained
    callback = _callback(model, tokenizer, str(tmp_path), keep_best=True, early_stopping=2)
    first = callback.evaluate(5)
    best_path = tmp_path / dev_bleu.BEST_WEIGHTS
    assert best_path.exists() and not model.stop_training
    saved = best_path.stat().st_mtime_ns
    original = [w.copy() for w in model.get_weights()]
    # Other weights: BLEU changes, and only a gain may overwrite best.weights.h5.
    model.set_weights([w + np.float32(0.5) * np.sign(w) for w in original])
    second = callback.evaluate(10)
    improved = second["bleu"] > first["bleu"]
    assert (best_path.stat().st_mtime_ns != saved) == improved
    model.set_weights(original)
    third = callback.evaluate(15)  # same weights as the first: no gain over it
    assert third["bleu"] == first["bleu"]
    # Two evaluations in a row without a gain (the third always; the second unless improved).
    assert model.stop_training == (not improved) and callback.stopped_early == (not improved)
    assert callback.evaluate(15) is third  # the same step is not decoded twice
    model.stop_training = False


def test_resumed_run_continues_the_curve(trained, tmp_path):
    _, model, tokenizer = trained
    _callback(model, tokenizer, str(tmp_path)).evaluate(5)
    resumed = _callback(model, tokenizer, str(tmp_path))
    assert [r["step"] for r in resumed.history] == [5]
    resumed.evaluate(10)
    history = dev_bleu.load_history(str(tmp_path))
    assert [r["step"] for r in history] == [5, 10]
    assert history[1]["minutes"] >= history[0]["minutes"]


def test_best_record_takes_the_earliest_of_ties():
    history = [dict(step=1, bleu=2.0), dict(step=2, bleu=3.0), dict(step=3, bleu=3.0)]
    assert dev_bleu.best_record(history)["step"] == 2
    assert dev_bleu.best_record([]) is None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(every_steps=0), "every_steps=0"),
        (dict(decode="sample"), "decode='sample'"),
        (dict(early_stopping=-1), "-1"),
    ],
)
def test_bad_arguments_name_the_value(kwargs, message, tmp_path):
    values = {"every_steps": 5, **kwargs}
    with pytest.raises(ValueError, match=message):
        dev_bleu.DevBleu(PAIRS, None, str(tmp_path), **values)


def test_training_config_checks_the_dev_flags():
    with pytest.raises(ValueError, match="eval_every_steps=0"):
        TrainingConfig.from_flat(eval_every_steps=0, early_stopping=2)
    with pytest.raises(ValueError, match="eval_decode='sampled'"):
        TrainingConfig.from_flat(eval_decode="sampled")
    with pytest.raises(ValueError, match="early_stopping=-2"):
        TrainingConfig.from_flat(early_stopping=-2)


def test_the_run_delivers_the_weights_its_flag_names(tmp_path):
    """`Runner.final_weights`: the averaged weights by default, the best dev-BLEU weights for
    `deliver="best"` where an evaluation saved them, else the averaged ones."""
    from keras_transformer.runner import Runner

    def delivered(**flags):
        cfg = TrainingConfig.from_flat(model_dir=str(tmp_path), **flags)
        return Runner(cfg, export_dir="none").final_weights()

    averaged = artifacts.path(str(tmp_path), artifacts.FINAL_WEIGHTS)
    best = artifacts.path(str(tmp_path), dev_bleu.BEST_WEIGHTS)
    open(best, "wb").close()
    assert delivered() == delivered(deliver="averaged") == averaged
    assert delivered(deliver="best") == best
    os.remove(best)  # no evaluation saved best weights
    assert delivered(deliver="best") == averaged


def test_deliver_flags_are_checked(capsys):
    from keras_transformer.cli.train import build_parser

    for value in ("everything", "auto"):
        with pytest.raises(ValueError, match=f"deliver={value!r}"):
            TrainingConfig.from_flat(deliver=value)
    with pytest.raises(ValueError, match="eval_every_steps=0, deliver='best'"):
        TrainingConfig.from_flat(eval_every_steps=0, deliver="best")
    with pytest.raises(ValueError, match=r"Unknown TrainingConfig fields: \['keep_best'\]"):
        TrainingConfig.from_flat(keep_best=True)
    for argv, message in (
        (["--deliver", "auto"], "invalid choice: 'auto'"),
        (["--keep-best"], "unrecognized arguments: --keep-best"),
    ):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)
        assert message in capsys.readouterr().err
