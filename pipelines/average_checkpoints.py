"""Average the last K checkpoints of a run into one weights file (paper, section 6.1: the last 5
checkpoints for base models, 20 for big ones).

    python pipelines/average_checkpoints.py --model-dir runs/sample_en_de --last 5
"""

from __future__ import annotations

import argparse
import os

from keras_transformer import artifacts, build_transformer
from keras_transformer.logging_utils import setup_logging
from keras_transformer.training import checkpoints


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--model-dir", required=True, help="run directory written by train_wmt.py")
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
    args = parser.parse_args(argv)
    setup_logging()
    if args.last < 1:
        parser.error(f"--last must be >= 1. Received: {args.last}")
    paths = args.checkpoints
    if not paths:
        found = checkpoints.list_checkpoints(
            artifacts.path(args.model_dir, artifacts.CHECKPOINT_DIR)
        )
        paths = [path for _, path in found[-args.last :]]
    if not paths:
        parser.error(f"no checkpoints found in {args.model_dir!r}")
    model = build_transformer(artifacts.load_config(args.model_dir))
    checkpoints.average_checkpoints(model, paths)
    output = args.output or artifacts.path(args.model_dir, artifacts.FINAL_WEIGHTS)
    model.save_weights(output, overwrite=True)
    print(f"averaged {len(paths)} checkpoints -> {os.path.abspath(output)}")


if __name__ == "__main__":
    main()
