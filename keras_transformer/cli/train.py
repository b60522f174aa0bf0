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
import sys
from collections.abc import Sequence

from keras_transformer.cli import common
from keras_transformer.config import TrainingConfig

# --SPLIT-source/--SPLIT-target F: `text:SOURCE,TARGET` as the value of this field.
FILE_PAIR_FIELDS = {"train": "dataset", "dev": "dev_dataset", "test": "test_dataset"}


def build_parser() -> argparse.ArgumentParser:
    """One flag per `TrainingConfig` field (`common.add_config_arguments`), `--export-dir`,
    the `--SPLIT-source/--SPLIT-target` pairs and `--debug`."""
    parser = common.make_parser(__doc__)
    groups = common.add_config_arguments(parser, TrainingConfig)
    groups["run"].add_argument(
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
        flag = "--" + field.replace("_", "-")
        for side in ("source", "target"):
            group.add_argument(
                f"--{split}-{side}",
                default=None,
                help=f"{split} {side} sentences, one a line, plain or .gz; --{split}-source "
                f"S --{split}-target T is {flag} text:S,T",
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
    return common.config_from_arguments(args, TrainingConfig, **_file_pair_datasets(args))


def train(args: argparse.Namespace) -> int:
    """Train (or resume), evaluate on the test split and export, as the flags say
    (`keras_transformer.runner.Runner`)."""
    from keras_transformer.runner import Runner

    runner = Runner(training_config(args), export_dir=args.export_dir)
    for line in runner.report(runner.run()):
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), train, argv)


if __name__ == "__main__":
    sys.exit(main())
