"""A training run from flags to a delivered model: train (or resume) and average the last
checkpoints (`training.trainer`), evaluate on the test split, write `summary.json` once,
export the SavedModel.

    runner = Runner(TrainingConfig.from_flat(model="tiny", train_steps=1200))
    result = runner.run()
    print("\\n".join(runner.report(result)))

Training does not decode (`training` and `decoding` are siblings): the runner, above both and
`serving`, hands training its dev evaluation (`decoding.dev_evaluation.DevEvaluator`) and, for
a run planned to a time budget, the work to keep time for after training (`EndOfRun`: the
test sentences, the export), both made before training starts; training never calls back.
A run stopped by a signal, a non-finite loss or a lost worker raises
`keras_transformer.training.errors`' exceptions, and a bad flag, model directory or corpus a
ValueError, before anything is evaluated or exported.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from keras_transformer import artifacts, recipes
from keras_transformer.config import TrainingConfig

logger = logging.getLogger("keras_transformer")

if TYPE_CHECKING:
    from keras_transformer.decoding.dev_evaluation import DevEvaluator
    from keras_transformer.training.budget import EndOfRun


@dataclass(frozen=True)
class RunResult:
    """What a run delivered.

    Args:
        summary: `summary.json`'s figures (on a worker of a cluster: training's only).
        weights: the weights evaluated and exported (None on a worker).
        exported: the SavedModel directory (None: no export, or a worker).
    """

    summary: dict[str, Any]
    weights: str | None = None
    exported: str | None = None


def resolve_config(cfg: TrainingConfig) -> TrainingConfig:
    """`cfg` as the run trains it, every None filled (`recipes.complete`) after what needs
    the run's files: `init_from`'s architecture and `vocab`'s size (`training.warm_start`)
    and the quick preset's dropout by corpus size (`training.regularization`). File checks
    and reading only: no TensorFlow work. `trainer.train` applies the same steps again, which
    change nothing then, and saves the result as `MODEL_DIR/training_config.json`."""
    from keras_transformer.training import regularization, warm_start

    cfg = regularization.with_quick_preset_dropout(warm_start.resolve(cfg))
    return recipes.complete(cfg)


class Runner:
    """Owns one training run: train, average, evaluate, export, summarize.

    Args:
        config: the run (`run` resolves it: `resolve_config`).
        export_dir: SavedModel export base (None: `MODEL_DIR/export`; "none": no export).
        devices: the machine the recipe was resolved for, logged with the config (None:
            not shown).
    """

    def __init__(
        self,
        config: TrainingConfig,
        export_dir: str | None = None,
        devices: recipes.Devices | None = None,
    ):
        self.config = config
        self.devices = devices
        export_dir = export_dir or os.path.join(config.run.model_dir, "export")
        self.export_dir = None if export_dir.lower() == "none" else export_dir

    def run(self) -> RunResult:
        """Resolve and log the config, train (or resume), then on the chief: the delivered
        weights' test BLEU in `summary.json` and their export with the evaluated beam
        search."""
        from keras_transformer.training import trainer

        self.config = resolve_config(self.config)
        lines = recipes.device_lines(self.config, self.devices) if self.devices else []
        for line in lines + recipes.config_lines(self.config):
            logger.info("Config %s", line)
        summary = trainer.train(self.config, self.dev_evaluator(), self.end_of_run())
        if not summary["chief"]:
            return RunResult(summary)
        weights = self.final_weights()
        self.write_summary(summary, weights)
        return RunResult(summary, weights, self.export(weights))

    def dev_evaluator(self) -> DevEvaluator | None:
        """The dev evaluation training runs every `eval_every_steps` (None if 0)."""
        from keras_transformer.data import corpus
        from keras_transformer.decoding.dev_evaluation import DevEvaluator

        evaluation, model_dir = self.config.evaluation, self.config.run.model_dir
        if not evaluation.eval_every_steps:
            return None
        pairs = list(corpus.read_split(self.config.data, "dev", limit=evaluation.eval_dev_pairs))
        return DevEvaluator(
            pairs, model_dir, evaluation.eval_every_steps, evaluation.eval_decode,
            self.config.eval_search(), keep_best=evaluation.deliver == "best",
            early_stopping=evaluation.early_stopping,
        )  # fmt: skip

    def end_of_run(self) -> EndOfRun | None:
        """The work after training a planned run keeps time for: the test sentences and
        the export (None: not a planned run)."""
        from keras_transformer.data import corpus
        from keras_transformer.training.budget import EndOfRun

        if not self.config.planned():
            return None
        evaluation, sentences = self.config.evaluation, 0
        if evaluation.eval_limit != 0:
            test = corpus.read_split(self.config.data, "test", limit=evaluation.eval_limit)
            sentences = sum(1 for _ in test)
        return EndOfRun(sentences, self.export_dir is not None)

    def final_weights(self) -> str:
        """The weights the run delivers (`EvaluationConfig.deliver`): the best dev-BLEU
        weights for "best" when an evaluation saved them, else the averaged final weights."""
        from keras_transformer.decoding.dev_evaluation import BEST_WEIGHTS

        model_dir = self.config.run.model_dir
        best = artifacts.path(model_dir, BEST_WEIGHTS)
        if self.config.evaluation.deliver == "best" and os.path.exists(best):
            return best
        return artifacts.path(model_dir, artifacts.FINAL_WEIGHTS)

    def evaluate(self, weights: str) -> dict[str, Any]:
        """BLEU/chrF of `weights` on the test split (beam search with the run's
        `eval_beam_size`/`eval_alpha`); hypotheses go to `MODEL_DIR/test.hyp.txt`."""
        from keras_transformer.data import corpus
        from keras_transformer.decoding.evaluation import evaluate_bleu

        model_dir = self.config.run.model_dir
        model, _, tokenizer = artifacts.load_trained(model_dir, weights)
        limit = self.config.evaluation.eval_limit
        pairs = list(corpus.read_split(self.config.data, "test", limit=limit))
        output = artifacts.path(model_dir, "test.hyp.txt")
        return evaluate_bleu(model, tokenizer, pairs, self.config.eval_search(), output_path=output)

    def write_summary(self, summary: dict[str, Any], weights: str) -> None:
        """Add the dev-BLEU curve, the delivered weights and (unless `eval_limit=0`) the test
        scores to training's `summary` and write it to `MODEL_DIR/summary.json`."""
        from keras_transformer.decoding.dev_evaluation import best_record, load_history

        model_dir = self.config.run.model_dir
        history = load_history(model_dir)
        summary.update(dev_bleu=history, best_dev=best_record(history), weights=weights)
        if self.config.evaluation.eval_limit != 0:
            summary["test"] = self.evaluate(weights)
        with open(artifacts.path(model_dir, artifacts.SUMMARY_FILE), "w") as f:
            json.dump(summary, f, indent=2)

    def export(self, weights: str) -> str | None:
        """The SavedModel of `weights` under `export_dir`, translating with the evaluated
        beam search (None without an export)."""
        if self.export_dir is None:
            return None
        from keras_transformer.serving.export import export_savedmodel

        return export_savedmodel(
            self.config.run.model_dir, self.export_dir, weights=weights,
            search=self.config.eval_search(),
        )  # fmt: skip

    def report(self, result: RunResult) -> list[str]:
        """The lines the training command prints at the end: how training stopped, if by its
        time limit, and one `done: ...` line with steps, speed, test BLEU and the outputs."""
        summary = result.summary
        if not summary["chief"]:
            return [f"done: worker, {summary['steps']} steps in {summary['train_seconds']:.0f}s"]
        lines = []
        if summary.get("stopped_by_time_limit"):
            # a planned run's last step is its plan's, not the bound before the plan
            planned = (summary.get("plan") or {}).get("total_steps")
            lines.append(
                f"stopped at step {summary['steps']} of {planned or self.config.step_limit()} "
                f"by the {summary['time_limit_seconds'] / 60:g}-minute limit (--train-minutes)"
            )
        test = summary.get("test", {})
        lines.append(
            f"done: {summary['steps']} steps in {summary['train_seconds']:.0f}s "
            f"({summary['tokens_per_sec'] or 0:.0f} target tokens/s over "
            f"{summary['step_seconds'] or 0:.0f}s of steps), "
            f"test BLEU {test.get('bleu', float('nan')):.2f}, "
            f"chrF {test.get('chrf', float('nan')):.2f}"
            f", weights {result.weights}, export {result.exported}"
        )
        return lines
