"""Convert a trained model directory to CTranslate2, for the fastest CPU inference.

    python export/to_ctranslate2.py --model-dir runs/en_de --output-dir runs/en_de_ct2
    python export/to_ctranslate2.py --model-dir runs/en_de --output-dir OUT --quantization int8

(or `python -m keras_transformer.cli.to_ctranslate2 ...`). Needs `pip install ctranslate2`.
Writes model.bin, config.json and shared_vocabulary.json (a `ctranslate2.Translator`
directory) and a copy of the run's spm.model, then prints the directory. Sources are
tokenized with that spm.model (no EOS: the model adds it); see
`keras_transformer.serving.ctranslate2_export` for the decoding options that reproduce
keras-transformer-translate.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from keras_transformer.cli import common
from keras_transformer.serving.ctranslate2_export import QUANTIZATIONS


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    common.add_model_arguments(parser)
    parser.add_argument(
        "--output-dir",
        required=True,
        help="directory to write the CTranslate2 model to (an earlier CTranslate2 model "
        "there is replaced; any other non-empty directory is refused)",
    )
    parser.add_argument(
        "--quantization",
        default=None,
        help="weight type: one of " + ", ".join(QUANTIZATIONS) + " (default: float32 as "
        "trained; int8 is about 4x smaller and the fastest on CPU)",
    )
    return parser


def convert(args: argparse.Namespace) -> int:
    from keras_transformer import artifacts
    from keras_transformer.serving.ctranslate2_export import export_ctranslate2_run

    output_dir = export_ctranslate2_run(
        args.model_dir, args.output_dir, args.quantization, weights=args.weights
    )
    max_length = artifacts.load_config(args.model_dir).max_length
    print(output_dir)
    print(
        "decode with translate_batch(..., min_decoding_length=0, "
        f"max_input_length={max_length}, max_decoding_length<={max_length})"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), convert, argv)


if __name__ == "__main__":
    sys.exit(main())
