"""The dev evaluation training runs (`keras_transformer.decoding.dev_evaluation.DevEvaluator`):
its figures against an independent decode-and-score, best-weights keeping, early stopping,
resume and the plot; and the weights a run delivers from them (`Runner.final_weights`)."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from keras_transformer import artifacts
from keras_transformer.config import SearchOptions, TrainingConfig
from keras_transformer.decoding import dev_evaluation
from keras_transformer.decoding.translator import Translator
from keras_transformer.testing.model_dir import SENTENCES, make_model_dir

PAIRS = [(SENTENCES[i], SENTENCES[i + 1]) for i in range(0, 24, 2)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    directory = make_model_dir(str(tmp_path_factory.mktemp("dev_bleu") / "model"))
    model, _, tokenizer = artifacts.load_trained(directory)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    return directory, model, tokenizer


def _evaluator(tokenizer, directory, **kwargs):
    evaluator = dev_evaluation.DevEvaluator(
        PAIRS, directory, every_steps=5, tokenizer=tokenizer, **kwargs
    )
    evaluator.start()
    return evaluator


def test_figures_match_an_independent_greedy_decode(trained, tmp_path):
    _, model, tokenizer = trained
    evaluator = _evaluator(tokenizer, str(tmp_path))
    record = evaluator.evaluate(model, 5)
    # Reference: beam size 1 through the translator's own search, scored by sacrebleu directly.
    hypotheses, _ = Translator(model, tokenizer, SearchOptions(beam_size=1)).translate(
        [source for source, _ in PAIRS]
    )
    expected = BLEU().corpus_score(hypotheses, [[target for _, target in PAIRS]]).score
    assert record["step"] == 5 and record["bleu"] == pytest.approx(expected, abs=0.005)
    assert evaluator.search.beam_size == 1
    assert json.loads((tmp_path / dev_evaluation.DEV_BLEU_FILE).read_text()) == [record]
    assert (tmp_path / dev_evaluation.CURVE_FILE).stat().st_size > 5000  # a drawn PNG
    assert os.listdir(tmp_path / artifacts.LOG_DIR / "dev_bleu")  # TensorBoard events


def test_without_a_tokenizer_it_reads_the_run_s_own(trained, tmp_path):
    """Training writes `spm.model` before the first evaluation: an evaluator made before
    training (the Runner's) reads it then and scores as one given the tokenizer."""
    import shutil

    directory, model, tokenizer = trained
    run_dir = tmp_path / "run"
    shutil.copytree(directory, run_dir)
    evaluator = dev_evaluation.DevEvaluator(PAIRS, str(run_dir), every_steps=5)
    record = evaluator.evaluate(model, 5)
    os.makedirs(tmp_path / "given")
    given = _evaluator(tokenizer, str(tmp_path / "given")).evaluate(model, 5)
    assert (record["bleu"], record["chrf"]) == (given["bleu"], given["chrf"])


def test_keep_best_and_early_stopping(trained, tmp_path):
    _, model, tokenizer = trained
    evaluator = _evaluator(tokenizer, str(tmp_path), keep_best=True, early_stopping=2)
    first = evaluator.evaluate(model, 5)
    best_path = tmp_path / dev_evaluation.BEST_WEIGHTS
    assert best_path.exists() and not evaluator.should_stop()
    saved = best_path.stat().st_mtime_ns
    original = [w.copy() for w in model.get_weights()]
    # Other weights: BLEU changes, and only a gain may overwrite best.weights.h5.
    model.set_weights([w + np.float32(0.5) * np.sign(w) for w in original])
    second = evaluator.evaluate(model, 10)
    improved = second["bleu"] > first["bleu"]
    assert (best_path.stat().st_mtime_ns != saved) == improved
    model.set_weights(original)
    third = evaluator.evaluate(model, 15)  # same weights as the first: no gain over it
    assert third["bleu"] == first["bleu"]
    # Two evaluations in a row without a gain (the third always; the second unless improved).
    assert evaluator.should_stop() == (not improved)
    assert evaluator.evaluate(model, 15) is third  # the same step is not decoded twice


def test_resumed_run_continues_the_curve(trained, tmp_path):
    _, model, tokenizer = trained
    _evaluator(tokenizer, str(tmp_path)).evaluate(model, 5)
    resumed = _evaluator(tokenizer, str(tmp_path))
    assert [r["step"] for r in resumed.history] == [5]
    resumed.evaluate(model, 10)
    history = dev_evaluation.load_history(str(tmp_path))
    assert [r["step"] for r in history] == [5, 10]
    assert history[1]["minutes"] >= history[0]["minutes"]


def test_best_record_takes_the_earliest_of_ties():
    history = [dict(step=1, bleu=2.0), dict(step=2, bleu=3.0), dict(step=3, bleu=3.0)]
    assert dev_evaluation.best_record(history)["step"] == 2
    assert dev_evaluation.best_record([]) is None


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
        dev_evaluation.DevEvaluator(PAIRS, str(tmp_path), **values)


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
    best = artifacts.path(str(tmp_path), dev_evaluation.BEST_WEIGHTS)
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
