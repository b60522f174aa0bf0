"""The dev evaluation that training runs (`DevEvaluator`, handed down to
`training.trainer.train`), its history and the learning curve.

    evaluator = DevEvaluator(pairs[:200], model_dir, every_steps=500, decode="greedy",
                             keep_best=True, early_stopping=4)
    trainer.train(cfg, evaluator)  # training calls evaluator.evaluate(model, step)

Each evaluation decodes a fixed dev subset and appends `{"step", "minutes", "bleu", "chrf",
"seconds"}` to `MODEL_DIR/dev_bleu.json` (so a resumed run continues the same curve), logs one
line, writes `dev_bleu` and `dev_chrf` to TensorBoard (`MODEL_DIR/logs/dev_bleu`) and redraws
`MODEL_DIR/learning_curve.png` (dev BLEU against steps and against minutes). With
`keep_best`, an improvement saves the weights as `MODEL_DIR/best.weights.h5`; with
`early_stopping=N`, after N evaluations in a row without improvement `should_stop()` is true
(training's run end then stops).

It decodes with the training model's own variables (one `Translator`, traced once), so it
runs only in the chief's process and costs no collective op.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence

import keras
import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.config import EVAL_DECODES, DocumentOptions, SearchOptions
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.decoding.evaluation import score_translations
from keras_transformer.decoding.translator import Translator

logger = logging.getLogger("keras_transformer")

DEV_BLEU_FILE = "dev_bleu.json"
BEST_WEIGHTS = "best.weights.h5"
CURVE_FILE = "learning_curve.png"


class DevEvaluator:
    """Dev-set BLEU/chrF of a model in training (`training.run_control.Evaluator`).

    Args:
        pairs: the fixed `(source, reference)` dev subset.
        model_dir: where the history, best weights, plot and TensorBoard logs go.
        every_steps: evaluation interval in optimizer updates (> 0).
        decode: "greedy" (beam 1, the cheap default) or "beam" (`search`, the paper's).
        search: beam settings for `decode="beam"` (default: `SearchOptions()`).
        keep_best: save `best.weights.h5` whenever dev BLEU improves (for a run that delivers
            them, or compares them with the averaged weights at its end: `translate_with`).
        early_stopping: ask to stop after this many evaluations without improvement (0:
            never).
        tokenizer: the run's `SubwordTokenizer` (None: `model_dir`'s, read at the first
            evaluation, after training wrote it).

    `batch_size` (64): sentences per decoding batch; an attribute, set it after construction.
    """

    batch_size = 64

    def __init__(
        self,
        pairs: Sequence[tuple[str, str]],
        model_dir: str,
        every_steps: int,
        decode: str = "greedy",
        search: SearchOptions | None = None,
        keep_best: bool = False,
        early_stopping: int = 0,
        tokenizer=None,
    ):
        if not pairs:
            raise ValueError("DevEvaluator needs at least one dev pair. Received: 0 pairs")
        if every_steps <= 0:
            raise ValueError(f"every_steps must be > 0. Received: every_steps={every_steps}")
        if decode not in EVAL_DECODES:
            raise ValueError(f"decode must be one of {EVAL_DECODES}. Received: decode={decode!r}")
        if early_stopping < 0:
            raise ValueError(f"early_stopping must be >= 0. Received: {early_stopping}")
        self.sources = [source for source, _ in pairs]
        self.references = [reference for _, reference in pairs]
        self.model_dir = model_dir
        self.every_steps = every_steps
        self.search = dev_search(decode, search)
        self.keep_best = keep_best
        self.early_stopping = early_stopping
        self.tokenizer = tokenizer
        self.history = load_history(model_dir)
        self._translator = None  # (model, its Translator)
        self._writer = None
        self._started = time.perf_counter()
        self._minutes_before = self.history[-1]["minutes"] if self.history else 0.0

    @property
    def best(self) -> dict | None:
        """The history record with the highest BLEU (the earliest of ties), or None."""
        return best_record(self.history)

    def start(self) -> None:
        """Training begins: the records' minutes count from here (plus a resumed curve's)."""
        self._started = time.perf_counter()

    def evaluate(self, model: keras.Model, step: int) -> dict:
        """Decode the dev subset with `model` after update `step`; record, log, plot, keep
        the best weights. A step already evaluated returns its record."""
        if self.history and self.history[-1]["step"] == step:
            return self.history[-1]
        started = time.perf_counter()
        hypotheses, _ = self._translate(model)
        scores = score_translations(hypotheses, self.references)
        minutes = self._minutes_before + (started - self._started) / 60.0
        previous_best = self.best
        record = dict(
            step=step, minutes=round(minutes, 3), bleu=round(scores["bleu"], 2),
            chrf=round(scores["chrf"], 2), seconds=round(time.perf_counter() - started, 1),
        )  # fmt: skip
        self.history.append(record)
        improved = previous_best is None or record["bleu"] > previous_best["bleu"]
        if improved and self.keep_best:
            model.save_weights(artifacts.path(self.model_dir, BEST_WEIGHTS), overwrite=True)
        self._report(record, improved)
        return record

    def should_stop(self) -> bool:
        """Whether the last `early_stopping` evaluations brought no gain (logged once)."""
        if not self.early_stopping or not self.history:
            return False
        stop = self._evaluations_since_best() >= self.early_stopping
        if stop:
            logger.info(
                "Early stopping at step %d: no dev BLEU gain in %d evaluations (best %.2f at "
                "step %d)", self.history[-1]["step"], self.early_stopping, self.best["bleu"],
                self.best["step"],
            )  # fmt: skip
        return stop

    def _translate(self, model: keras.Model):
        if self._translator is None or self._translator[0] is not model:
            if self.tokenizer is None:
                path = artifacts.path(self.model_dir, artifacts.TOKENIZER_FILE)
                self.tokenizer = SubwordTokenizer.from_file(path)
            translator = Translator(
                model, self.tokenizer, self.search, documents=DocumentOptions.sentences()
            )
            self._translator = (model, translator)
        return self._translator[1].translate(self.sources, batch_size=self.batch_size)

    def _evaluations_since_best(self) -> int:
        best_index = self.history.index(self.best)
        return len(self.history) - 1 - best_index

    def _report(self, record: dict, improved: bool) -> None:
        best = self.best
        logger.info(
            "step %d: dev BLEU %.2f, chrF %.2f on %d sentences (%s, %.0fs)%s",
            record["step"], record["bleu"], record["chrf"], len(self.sources),
            "greedy" if self.search.beam_size == 1 else f"beam {self.search.beam_size}",
            record["seconds"],
            " new best" if improved else f", best {best['bleu']:.2f} at step {best['step']}",
        )  # fmt: skip
        with open(artifacts.path(self.model_dir, DEV_BLEU_FILE), "w") as f:
            json.dump(self.history, f, indent=1)
        if self._writer is None:
            log_dir = os.path.join(artifacts.path(self.model_dir, artifacts.LOG_DIR), "dev_bleu")
            self._writer = tf.summary.create_file_writer(log_dir)
        with self._writer.as_default(step=record["step"]):
            tf.summary.scalar("dev_bleu", record["bleu"])
            tf.summary.scalar("dev_chrf", record["chrf"])
        self._writer.flush()
        plot_learning_curve(self.history, artifacts.path(self.model_dir, CURVE_FILE))


def dev_search(decode: str, search: SearchOptions | None = None) -> SearchOptions:
    """The search of a dev evaluation: `search` (default `SearchOptions()`) with one
    hypothesis, and beam 1 for `decode="greedy"`."""
    search = (search or SearchOptions()).replace(n_best=1)
    return search.replace(beam_size=1) if decode == "greedy" else search


def translate_with(
    model,
    tokenizer,
    sources: Sequence[str],
    search: SearchOptions,
    weights: Sequence[str],
    batch_size: int = DevEvaluator.batch_size,
) -> list[list[str]]:
    """The translations of `sources` by each of `weights` loaded in turn into `model`, decoded
    as `DevEvaluator` decodes (`search` from `dev_search`; one `Translator`, traced once)."""
    translator = Translator(model, tokenizer, search, documents=DocumentOptions.sentences())
    outputs = []
    for path in weights:
        model.load_weights(path)
        outputs.append(translator.translate(list(sources), batch_size=batch_size)[0])
    return outputs


def load_history(model_dir: str) -> list[dict]:
    """The dev-BLEU records of a model directory (`[]` when there are none)."""
    path = artifacts.path(model_dir, DEV_BLEU_FILE)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def best_record(history: Sequence[dict]) -> dict | None:
    """The record with the highest BLEU (the earliest of ties), or None for no records."""
    best = None
    for record in history:
        if best is None or record["bleu"] > best["bleu"]:
            best = record
    return best


def plot_learning_curve(history: Sequence[dict], path: str, title: str | None = None) -> str:
    """Dev BLEU against steps (left) and against minutes since the run started (right), as a
    PNG at `path`; the best point is marked. Returns `path`."""
    return plot_learning_curves({"": history}, path, title)


def plot_learning_curves(
    histories: dict[str, Sequence[dict]], path: str, title: str | None = None
) -> str:
    """`plot_learning_curve` of several runs on the same axes, one line per `{label:
    history}` (a legend when labelled); each run's best point is marked. Returns `path`."""
    from matplotlib.figure import Figure

    height = 3.4 + 0.3 * len(histories) * any(histories)
    figure = Figure(figsize=(9, height), layout="constrained")
    for axes, key, label in zip(figure.subplots(1, 2), ("step", "minutes"), ("step", "minutes")):
        for name, history in histories.items():
            bleu = [r["bleu"] for r in history]
            (line,) = axes.plot([r[key] for r in history], bleu, marker="o", label=name or None)
            best = best_record(history)
            if best is not None:
                color = "tab:red" if len(histories) == 1 else line.get_color()
                axes.plot([best[key]], [best["bleu"]], marker="*", markersize=14, color=color)
        axes.set_xlabel(f"training {label}")
        axes.set_ylabel("dev BLEU")
        axes.grid(alpha=0.3)
    if any(histories):  # one legend for both panels, under them: labels may be long
        figure.legend(*axes.get_legend_handles_labels(), loc="outside lower center")
    figure.suptitle(title or "Dev BLEU while training (star: best)")
    figure.savefig(path, dpi=100)
    return path
