"""Train a Transformer translator: `python pipelines/train_wmt.py --help`.

Defaults train the tiny model on the bundled English-German corpus (about 10 minutes on a
2-core CPU), report BLEU on its test split and export a SavedModel for TF Serving. Paper
recipe on WMT14 (8 GPUs): `--config base --dataset wmt14_en_de --vocab-size 37000
--batch-tokens 3125 --warmup-steps 4000 --train-steps 100000 --average-last 5`.
Run the same command again after an interruption: it resumes from the latest checkpoint.
Several machines: TF_CONFIG per process (see BUILD.md), or on one machine
`python -m keras_transformer.training.launch --workers 2 -- <these flags>`.
Exit codes: 2 bad flags or model directory (one `error:` line; --debug shows the traceback),
3 non-finite loss (nothing saved from it; rerunning resumes from the last good checkpoint),
4 another worker of a cluster stopped (restart all workers: they resume together).
"""

from __future__ import annotations

import argparse
import os
import sys

from keras_transformer.config import MIXED_PRECISION, NORM_POSITIONS, STRATEGIES, TrainingConfig
from keras_transformer.logging_utils import setup_logging
from keras_transformer.training.errors import NonFiniteLossError, WorkerLostError

HELP = {
    "config": "model preset: tiny (CPU minutes), base (paper, 65M), big (paper, 213M)",
    "dataset": "sample_en_de | sample_en_fr (bundled) | wmt14_en_de | wmt14_en_fr (TFDS) | "
    "tsv:PATH (source<TAB>target lines)",
    "model_dir": "output directory; an existing run there is resumed",
    "train_steps": "total optimizer updates",
    "vocab_size": "shared SentencePiece BPE vocabulary size (paper: 37000 En-De, 32000 En-Fr)",
    "batch_tokens": "padded source/target tokens per replica batch; global = this x replicas "
    "(paper: 25000 global)",
    "max_length": "longest sentence in subword pieces kept for training",
    "warmup_steps": "linear warm-up steps of the learning-rate schedule (paper: 4000)",
    "learning_rate_scale": "constant factor on the paper's learning-rate formula",
    "label_smoothing": "epsilon of label smoothing (paper: 0.1)",
    "dropout": "override the preset's dropout (paper: 0.1 base, 0.3 big En-De)",
    "num_layers": "override the preset's number of encoder and decoder layers (N)",
    "d_model": "override the preset's model width",
    "d_ff": "override the preset's feed-forward inner width",
    "num_heads": "override the preset's number of attention heads",
    "norm_position": "override the preset's LayerNorm placement: post (paper) or pre",
    "strategy": "tf.distribute strategy; auto = MirroredStrategy over all GPUs if several",
    "cpu_replicas": "split the CPU into N logical devices (test MirroredStrategy without GPUs)",
    "mixed_precision": "compute dtype policy; logits and loss stay float32",
    "jit_compile": "XLA-compile the train step",
    "steps_per_epoch": "steps between dev-set evaluations (a Keras epoch)",
    "checkpoint_every_steps": "checkpoint interval in steps",
    "checkpoint_every_minutes": "checkpoint interval in minutes (whichever comes first)",
    "keep_checkpoints": "checkpoints kept on disk",
    "average_last": "average the last K checkpoints into the final weights (paper: 5/20)",
    "log_every_steps": "TensorBoard scalar interval (loss, lr, accuracy, tokens/s)",
    "seed": "random seed for weights, shuffling and dropout",
    "eval_beam_size": "beam size of the final test-set evaluation (paper: 4)",
    "eval_alpha": "length penalty alpha of the final evaluation (paper: 0.6)",
    "eval_limit": "evaluate on the first N test pairs only (0: skip evaluation)",
    "data_dir": "TFDS data directory for the WMT datasets",
    "skip_nonfinite_batches": "skip (do not apply, log) up to N batches with a non-finite loss "
    "or gradient in the whole run; 0: stop at the first",
    "deterministic": "enable TF op determinism (deterministic GPU kernels); CPU runs are "
    "bit-reproducible without it",
}


def parse_args(argv=None) -> tuple[TrainingConfig, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    defaults = TrainingConfig()
    choices = {"config": ("tiny", "base", "big"), "strategy": STRATEGIES}
    choices["mixed_precision"] = MIXED_PRECISION
    choices["norm_position"] = NORM_POSITIONS
    optional_types = {"dropout": float, "eval_limit": int, "norm_position": str}
    for name, text in HELP.items():
        field = "model" if name == "config" else name
        default = getattr(defaults, field)
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true", help=text)
            continue
        kind = type(default) if default is not None else optional_types.get(name, int)
        kind = int if name == "eval_limit" else kind
        parser.add_argument(
            flag,
            type=kind or str,
            default=default,
            choices=choices.get(name),
            help=f"{text} (default: {default})",
        )
    parser.add_argument(
        "--export-dir",
        default=None,
        help="SavedModel export base (default: MODEL_DIR/export; 'none' to skip)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    args = parser.parse_args(argv)
    values = {("model" if k == "config" else k): getattr(args, k) for k in HELP}
    return TrainingConfig(**values), args


def main(argv=None) -> None:
    setup_logging()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        run(argv)
    except (ValueError, NonFiniteLossError, WorkerLostError) as error:
        if "--debug" in argv:
            raise
        if not isinstance(error, ValueError):
            print(flush=True)  # end the progress bar's line
        print(f"error: {error}", file=sys.stderr)
        sys.exit({NonFiniteLossError: 3, WorkerLostError: 4}.get(type(error), 2))


def run(argv) -> None:
    cfg, args = parse_args(argv)
    from keras_transformer.training.trainer import train

    summary = train(cfg)
    if not summary["chief"]:
        print(f"done: worker, {summary['steps']} steps in {summary['train_seconds']:.0f}s")
        return
    export_dir = args.export_dir or os.path.join(cfg.model_dir, "export")
    exported = None
    if export_dir.lower() != "none":
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from export.export_savedmodel import export_savedmodel  # export/ sits beside pipelines/

        exported = export_savedmodel(cfg.model_dir, export_dir)
    test = summary.get("test") or {}
    print(
        f"done: {summary['steps']} steps in {summary['train_seconds']:.0f}s "
        f"({summary['tokens_per_sec'] or 0:.0f} target tokens/s), "
        f"test BLEU {test.get('bleu', float('nan')):.2f}, chrF {test.get('chrf', float('nan')):.2f}"
        f", weights {cfg.model_dir}/final.weights.h5, export {exported}"
    )


if __name__ == "__main__":
    main()
