"""Average the last K checkpoints of a run into one weights file (paper, section 6.1: the last 5
checkpoints for base models, 20 for big ones).

    keras-transformer-average-checkpoints --model-dir runs/sample_en_de --last 5

(or `python pipelines/average_checkpoints.py ...`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from keras_transformer.cli import common


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    common.add_model_arguments(parser, weights=False)
    parser.add_argument(
        "--last", type=int, default=5, help="average the last K checkpoints (default: 5)"
    )
    parser.add_argument(
        "--checkpoints", nargs="*", default=None,
        help="explicit checkpoint files to average instead of the last K",
    )  # fmt: skip
    parser.add_argument(
        "--output", default=None,
        help="weights file to write (default: MODEL_DIR/final.weights.h5)",
    )  # fmt: skip
    return parser


def average(args: argparse.Namespace) -> int:
    from keras_transformer import artifacts, build_transformer
    from keras_transformer.training import checkpoints

    if args.last < 1:
        raise ValueError(f"--last must be >= 1. Received: --last {args.last}")
    config = artifacts.load_config(args.model_dir)  # fails first on a wrong directory
    paths = args.checkpoints
    if not paths:
        found = artifacts.list_checkpoints(artifacts.path(args.model_dir, artifacts.CHECKPOINT_DIR))
        paths = [path for _, path in found[-args.last :]]
    if not paths:
        raise FileNotFoundError(f"No checkpoints found in model_dir={args.model_dir!r}")
    model = build_transformer(config)
    checkpoints.average_checkpoints(model, paths)
    output = args.output or artifacts.path(args.model_dir, artifacts.FINAL_WEIGHTS)
    model.save_weights(output, overwrite=True)
    print(f"averaged {len(paths)} checkpoints -> {os.path.abspath(output)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), average, argv)


if __name__ == "__main__":
    sys.exit(main())
