"""Translate lines with a trained model: one source per line in, one translation per line out.

    echo "The cat sleeps." | keras-transformer-translate --model-dir runs/tiny_en_de
    keras-transformer-translate --model-dir DIR --input news.en --n-best 4 > news.nbest

(or `python pipelines/translate.py ...`). With --n-best K, each source gives K lines
`INDEX ||| TRANSLATION ||| SCORE` (Moses n-best format, INDEX counting sources from 0), best
first.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from keras_transformer.cli import common


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    common.add_model_arguments(parser)
    parser.add_argument(
        "--input", default=None, help="UTF-8 text file, one source per line (default: stdin)"
    )
    common.add_search_arguments(parser)
    parser.add_argument(
        "--n-best",
        type=int,
        default=None,
        help="print the K best translations per source (K <= beam size)",
    )
    parser.add_argument(
        "--scores",
        action="store_true",
        help="1-best output: prefix each line with its score and a tab",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="sources per batch")
    return parser


def read_lines(path: str | None) -> list[str]:
    if path is None:
        return [line.rstrip("\n") for line in sys.stdin]
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def translate(args: argparse.Namespace) -> int:
    from keras_transformer import artifacts
    from keras_transformer.decoding import Translator

    # n_best is checked against the beam size here, before the model loads.
    search = common.search_options(args, n_best=1 if args.n_best is None else args.n_best)
    model, _, tokenizer = artifacts.load_trained(args.model_dir, weights=args.weights)
    lines = read_lines(args.input)
    translator = Translator(model, tokenizer, search)
    outputs, scores = translator.translate(lines, batch_size=args.batch_size, n_best=args.n_best)
    for index, (output, score) in enumerate(zip(outputs, scores)):
        if args.n_best is not None:
            for text, value in zip(output, score):
                print(f"{index} ||| {text} ||| {value:.6f}")
        elif args.scores:
            print(f"{score:.6f}\t{output}")
        else:
            print(output)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), translate, argv)


if __name__ == "__main__":
    sys.exit(main())
