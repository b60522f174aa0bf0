"""Train a Transformer translator (`keras-transformer-train --help`, or
`python pipelines/train_wmt.py --help`).

Defaults train the `quick` preset on the bundled English-German corpus (about ten minutes on a
2-core CPU), report BLEU on its test split and export a SavedModel for TF Serving. Paper
recipe on WMT14 (8 GPUs): `--config base --dataset wmt14_en_de --vocab-size 37000
--batch-tokens 3125 --warmup-steps 4000 --train-steps 100000 --average-last 5`.
Run the same command again after an interruption: it resumes from the latest checkpoint.
Several machines: TF_CONFIG per process (see BUILD.md), or on one machine
`python -m keras_transformer.training.launch --workers 2 -- <these flags>`.
Exit codes: 2 bad flags or model directory (one `error:` line; --debug shows the traceback),
3 non-finite loss (nothing saved from it; rerunning resumes from the last good checkpoint),
4 another worker of a cluster stopped (restart all workers: they resume together),
143 stopped by SIGTERM or SIGINT (any worker's, under several) after writing a checkpoint at
the update it finished: rerun the same command to resume (--preemption-grace-seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from keras_transformer import artifacts
from keras_transformer.cli import common
from keras_transformer.config import (
    DECAYS,
    EVAL_DECODES,
    FREEZE_CHOICES,
    MIXED_PRECISION,
    NORM_POSITIONS,
    STRATEGIES,
    TrainingConfig,
)

PRESETS = ("quick", "tiny", "base", "big")
NONFINITE_STATUS = 3
WORKER_LOST_STATUS = 4

# TrainingConfig field -> help text; every field is a flag (`--config` for `model`).
HELP = {
    "model": "model preset: quick (tiny sizes, pre-norm, no dropout: 10 CPU minutes), tiny, "
    "base (paper, 65M), big (paper, 213M)",
    "dataset": "sample_en_de | sample_en_fr (bundled) | wmt14_en_de | wmt14_en_fr (TFDS) | "
    "tsv:PATH (source<TAB>target lines) | text:SRC,TGT (two files, one sentence a line); "
    "several weighted corpora: SPEC@WEIGHT+SPEC@WEIGHT, e.g. sample_en_de+tsv:own.tsv@3 (an "
    "epoch takes round(WEIGHT x size) pairs of each; dev and test: the first corpus's). "
    "Without dev/test files, dev and test are carved off the train file (1%% each, by "
    "normalized source: no dev/test source is also in train)",
    "dev_dataset": "dev split read whole from this tsv:PATH or text:SRC,TGT (default: the "
    "dataset's own; see also --dev-source/--dev-target)",
    "test_dataset": "test split read whole from this tsv:PATH or text:SRC,TGT (default: the "
    "dataset's own; see also --test-source/--test-target)",
    "reverse": "swap source and target of every split: translate target -> source language "
    "(e.g. German -> English with sample_en_de); dev and test BLEU use the swapped references",
    "model_dir": "output directory; an existing run there is resumed",
    "train_steps": "total optimizer updates (default: planned to --time-budget-minutes when "
    "there is a budget, else 2000)",
    "train_minutes": "stop training before a step that would end past N minutes of wall clock "
    "(evaluations included), even before --train-steps; then checkpoint, average, evaluate "
    "and export as usual. Default: 9.5 for --config quick (the default command trains in at "
    "most ten minutes on any CPU), no limit for the others; 0: no limit. With several "
    "workers the first to reach it stops all of them after the same step",
    "time_budget_minutes": "the whole run's budget in minutes, from start to export, that a "
    "run without --train-steps plans its steps to: it measures the step time after the first "
    "steps, records the plan in MODEL_DIR/plan.json and decays the learning rate to zero at the "
    "planned last step (a rerun follows the recorded plan). Default: 10 for --config quick, "
    "none for the others; 0: none",
    "vocab_size": "shared SentencePiece BPE vocabulary size (paper: 37000 En-De, 32000 En-Fr)",
    "batch_tokens": "padded source/target tokens per replica batch; global = this x replicas "
    "(paper: 25000 global)",
    "accumulate_steps": "average the gradients of K micro-batches into one update (gradient "
    "accumulation); steps, schedule and intervals count updates, each of K x replicas x "
    "batch-tokens tokens (paper's 25000 on one GPU: --batch-tokens 3125 --accumulate-steps 8)",
    "max_length": "longest sentence in subword pieces kept for training",
    "warmup_steps": "linear warm-up steps of the learning-rate schedule (paper: 4000)",
    "learning_rate_scale": "constant factor on the paper's learning-rate formula",
    "cooldown_steps": "decay the learning rate linearly to zero over the last N of --train-steps "
    "(paper: 0, its formula to the end)",
    "decay": "learning-rate decay after warm-up: rsqrt (paper: inverse square root), "
    "rsqrt_cooldown (rsqrt, then linear to zero over the last 20%% of the decay), linear (to "
    "zero at the last step) or cosine (to zero at the last step). Default: linear for a run "
    "planned to a time budget, rsqrt otherwise",
    "label_smoothing": "epsilon of label smoothing (paper: 0.1)",
    "dropout": "override the preset's dropout (paper: 0.1 base, 0.3 big En-De)",
    "num_layers": "override the preset's number of encoder and decoder layers (N)",
    "d_model": "override the preset's model width",
    "d_ff": "override the preset's feed-forward inner width",
    "num_heads": "override the preset's number of attention heads",
    "norm_position": "override the preset's LayerNorm placement: post (paper) or pre",
    "strategy": "tf.distribute strategy; auto = MirroredStrategy over all GPUs if several",
    "cpu_replicas": "split the CPU into N logical devices (test MirroredStrategy without GPUs)",
    "mixed_precision": "compute dtype policy; logits and loss stay float32. auto: "
    "mixed_bfloat16 on a machine without GPUs whose CPU has bfloat16 arithmetic (AVX512_BF16 "
    "or AMX; 1.27x faster default command, same BLEU), else none (float32)",
    "jit_compile": "XLA-compile the train step",
    "steps_per_epoch": "steps between dev-set evaluations (a Keras epoch)",
    "checkpoint_every_steps": "checkpoint interval in steps",
    "checkpoint_every_minutes": "checkpoint interval in minutes (whichever comes first)",
    "preemption_grace_seconds": "on SIGTERM (a preempted machine) or SIGINT (Ctrl-C): finish "
    "the update in flight, write a checkpoint and exit with status 143 within N seconds (a "
    "watchdog exits with 143 if a step outlasts it); rerun the same command to resume",
    "keep_checkpoints": "checkpoints kept on disk",
    "average_last": "average the last K checkpoints into the final weights (paper: 5/20)",
    "log_every_steps": "TensorBoard scalar interval (loss, lr, accuracy, tokens/s)",
    "seed": "random seed for weights, shuffling and dropout",
    "eval_beam_size": "beam size of the final test-set evaluation (paper: 4)",
    "eval_alpha": "length penalty alpha of the final evaluation and the export; None: 1.2 "
    "for the quick preset (chosen on the dev split), the paper's 0.6 for the others",
    "eval_limit": "evaluate on the first N test pairs only (0: skip evaluation)",
    "eval_every_steps": "decode the dev subset every N steps: dev BLEU/chrF in the log, "
    "TensorBoard, MODEL_DIR/dev_bleu.json and learning_curve.png (0: never)",
    "eval_dev_pairs": "size of the dev subset (the dev split's first pairs)",
    "eval_decode": "how to decode the dev subset: greedy (cheap) or beam (--eval-beam-size, "
    "--eval-alpha)",
    "keep_best": "keep the weights of the best dev BLEU (best.weights.h5); test BLEU and the "
    "export use them instead of the averaged final weights",
    "early_stopping": "stop after N dev evaluations in a row without a BLEU gain (0: never)",
    "data_dir": "TFDS data directory for the WMT datasets",
    "skip_nonfinite_batches": "skip (do not apply, log) up to N batches with a non-finite loss "
    "or gradient in the whole run; 0: stop at the first",
    "deterministic": "enable TF op determinism (deterministic GPU kernels); CPU runs are "
    "bit-reproducible without it",
    "init_from": "fine-tune RUN_DIR's final weights (or a run's .weights.h5 file) with its "
    "spm.model and architecture: flags left at their defaults take the run's values, a "
    "conflicting --config/--vocab-size/--d-model... is refused. The optimizer starts fresh "
    "and warm-up runs again: fine-tuning usually wants a lower --learning-rate-scale and a "
    "small --warmup-steps. A rerun resumes from MODEL_DIR's own checkpoints",
    "vocab": "an existing SentencePiece .model (ids 0 pad, 1 unk, 2 bos, 3 eos, as this tool "
    "trains them) copied to MODEL_DIR/spm.model instead of training one; the vocabulary size "
    "is its own (leave out --vocab-size)",
    "freeze": "leave untrained: encoder (its layers) or embeddings (the shared embedding "
    "matrix, which is also the pre-softmax projection: the output layer is frozen too)",
}
CHOICES = {
    "model": PRESETS,
    "decay": DECAYS,
    "strategy": STRATEGIES,
    "mixed_precision": MIXED_PRECISION,
    "norm_position": NORM_POSITIONS,
    "eval_decode": EVAL_DECODES,
    "freeze": FREEZE_CHOICES,
}
# Fields whose default is None: the type of a value given on the command line (else int).
OPTIONAL_TYPES = {
    "train_steps": int,
    "time_budget_minutes": float,
    "decay": str,
    "dropout": float,
    "eval_alpha": float,
    "train_minutes": float,
    "norm_position": str,
    "data_dir": str,
    "dev_dataset": str,
    "test_dataset": str,
    "init_from": str,
    "vocab": str,
    "freeze": str,
}
# --SPLIT-source/--SPLIT-target F: `text:SOURCE,TARGET` as the value of this field.
FILE_PAIR_FIELDS = {"train": "dataset", "dev": "dev_dataset", "test": "test_dataset"}


def _flag(field: str) -> str:
    return "--config" if field == "model" else "--" + field.replace("_", "-")


def build_parser() -> argparse.ArgumentParser:
    """One flag per `TrainingConfig` field (defaults from `TrainingConfig()`), `--export-dir`
    and `--debug`."""
    parser = common.make_parser(__doc__)
    defaults = TrainingConfig()
    for field, text in HELP.items():
        default = getattr(defaults, field)
        if isinstance(default, bool):
            parser.add_argument(_flag(field), dest=field, action="store_true", help=text)
            continue
        parser.add_argument(
            _flag(field),
            dest=field,
            type=type(default) if default is not None else OPTIONAL_TYPES.get(field, int),
            default=default,
            choices=CHOICES.get(field),
            help=f"{text} (default: {default})",
        )
    parser.add_argument(
        "--export-dir",
        default=None,
        help="SavedModel export base (default: MODEL_DIR/export; 'none' to skip)",
    )
    _add_file_pair_flags(parser)
    return parser


def _add_file_pair_flags(parser: argparse.ArgumentParser) -> None:
    """`--train-source F --train-target F` = `--dataset text:F,F`; dev and test alike."""
    group = parser.add_argument_group("corpora as two files (source, target: one sentence a line)")
    for split, field in FILE_PAIR_FIELDS.items():
        for side in ("source", "target"):
            group.add_argument(
                f"--{split}-{side}",
                default=None,
                help=f"{split} {side} sentences, one a line, plain or .gz; --{split}-source "
                f"S --{split}-target T is {_flag(field)} text:S,T",
            )


def _file_pair_datasets(args: argparse.Namespace) -> dict[str, str]:
    """`{field: "text:SOURCE,TARGET"}` of the `--SPLIT-source/--SPLIT-target` flags given."""
    from keras_transformer.data.corpus_files import text_dataset

    datasets = {}
    for split, field in FILE_PAIR_FIELDS.items():
        source, target = getattr(args, f"{split}_source"), getattr(args, f"{split}_target")
        if (source is None) != (target is None):
            raise ValueError(
                f"--{split}-source and --{split}-target go together. "
                f"Received: --{split}-source={source!r}, --{split}-target={target!r}"
            )
        if source is not None:
            datasets[field] = text_dataset(source, target)
    return datasets


def training_config(args: argparse.Namespace) -> TrainingConfig:
    """The `TrainingConfig` of parsed flags (a bad combination raises a ValueError naming it)."""
    values = {field: getattr(args, field) for field in HELP}
    return TrainingConfig(**{**values, **_file_pair_datasets(args)})


def final_weights(cfg: TrainingConfig) -> str:
    """The weights the run delivers: the best dev-BLEU weights with `keep_best` (when an
    evaluation saved them), else the averaged final weights."""
    from keras_transformer.decoding.dev_bleu import BEST_WEIGHTS

    best = artifacts.path(cfg.model_dir, BEST_WEIGHTS)
    if cfg.keep_best and os.path.exists(best):
        return best
    return artifacts.path(cfg.model_dir, artifacts.FINAL_WEIGHTS)


def dev_bleu_callbacks(cfg: TrainingConfig):
    """`trainer.train`'s `chief_callbacks`: dev BLEU every `eval_every_steps` (none if 0)."""
    from keras_transformer.data import corpus
    from keras_transformer.decoding.dev_bleu import DevBleu

    def make(tokenizer) -> list:
        if not cfg.eval_every_steps:
            return []
        pairs = list(corpus.read_split(cfg, "dev", limit=cfg.eval_dev_pairs))
        return [
            DevBleu(
                pairs,
                tokenizer,
                cfg.model_dir,
                cfg.eval_every_steps,
                cfg.eval_decode,
                cfg.eval_search(),
                keep_best=cfg.keep_best,
                early_stopping=cfg.early_stopping,
            )
        ]

    return make


def end_of_run_reserve(cfg: TrainingConfig, export: bool):
    """`reserve(seconds_per_step, first_step_seconds)` of a planned run: the seconds its test
    evaluation and export will take (`training.budget.end_of_run_seconds`)."""
    from keras_transformer.data import corpus
    from keras_transformer.training.budget import end_of_run_seconds

    if not cfg.planned():
        return None
    sentences = 0
    if cfg.eval_limit != 0:
        sentences = sum(1 for _ in corpus.read_split(cfg, "test", limit=cfg.eval_limit))

    def reserve(seconds_per_step: float, first_step_seconds: float) -> float:
        return end_of_run_seconds(seconds_per_step, first_step_seconds, sentences, export)

    return reserve


def evaluate_test_split(cfg: TrainingConfig, weights: str) -> dict[str, Any]:
    """BLEU/chrF of `weights` on the test split (beam search with the run's
    `eval_beam_size`/`eval_alpha`); hypotheses go to `MODEL_DIR/test.hyp.txt`."""
    from keras_transformer.data import corpus
    from keras_transformer.decoding.evaluation import evaluate_bleu

    model, _, tokenizer = artifacts.load_trained(cfg.model_dir, weights)
    pairs = list(corpus.read_split(cfg, "test", limit=cfg.eval_limit))
    output = artifacts.path(cfg.model_dir, "test.hyp.txt")
    return evaluate_bleu(model, tokenizer, pairs, cfg.eval_search(), output_path=output)


def _finish_summary(cfg: TrainingConfig, summary: dict[str, Any], weights: str) -> dict:
    """Add the dev-BLEU curve, the delivered weights and (unless `eval_limit=0`) the test
    scores to `summary.json`; returns the test scores (`{}` without them)."""
    from keras_transformer.decoding.dev_bleu import best_record, load_history

    history = load_history(cfg.model_dir)
    summary.update(dev_bleu=history, best_dev=best_record(history), weights=weights)
    if cfg.eval_limit != 0:
        summary["test"] = evaluate_test_split(cfg, weights)
    with open(artifacts.path(cfg.model_dir, artifacts.SUMMARY_FILE), "w") as f:
        json.dump(summary, f, indent=2)
    return summary.get("test", {})


def train(args: argparse.Namespace) -> int:
    """Train (or resume), evaluate on the test split and export, as the flags say."""
    from keras_transformer.training.errors import (
        PREEMPTED_STATUS,
        NonFiniteLossError,
        PreemptedError,
        WorkerLostError,
    )
    from keras_transformer.training.trainer import train as train_model

    cfg = training_config(args)
    export_dir = args.export_dir or os.path.join(cfg.model_dir, "export")
    reserve = end_of_run_reserve(cfg, export=export_dir.lower() != "none")
    try:
        summary = train_model(cfg, dev_bleu_callbacks(cfg), reserve)
    except PreemptedError as error:
        print(flush=True)  # end the progress bar's line
        print(f"stopped: {error}", file=sys.stderr)
        return PREEMPTED_STATUS
    except (NonFiniteLossError, WorkerLostError) as error:
        if args.debug:
            raise
        print(flush=True)
        print(f"error: {common.error_line(error)}", file=sys.stderr)
        return NONFINITE_STATUS if isinstance(error, NonFiniteLossError) else WORKER_LOST_STATUS
    if not summary["chief"]:
        print(f"done: worker, {summary['steps']} steps in {summary['train_seconds']:.0f}s")
        return 0
    weights = final_weights(cfg)
    test = _finish_summary(cfg, summary, weights)
    exported = None
    if export_dir.lower() != "none":
        from keras_transformer.serving.export import export_savedmodel

        exported = export_savedmodel(
            cfg.model_dir, export_dir, weights=weights, search=cfg.eval_search()
        )
    if summary.get("stopped_by_time_limit"):
        print(
            f"stopped at step {summary['steps']} of {cfg.step_limit()} by the "
            f"{summary['time_limit_seconds'] / 60:g}-minute limit (--train-minutes)"
        )
    print(
        f"done: {summary['steps']} steps in {summary['train_seconds']:.0f}s "
        f"({summary['tokens_per_sec'] or 0:.0f} target tokens/s over "
        f"{summary['step_seconds'] or 0:.0f}s of steps), "
        f"test BLEU {test.get('bleu', float('nan')):.2f}, chrF {test.get('chrf', float('nan')):.2f}"
        f", weights {weights}, export {exported}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), train, argv)


if __name__ == "__main__":
    sys.exit(main())
