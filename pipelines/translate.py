"""Translate lines with a trained model: one source per line in, one translation per line out.

    echo "The cat sleeps." | python pipelines/translate.py --model-dir runs/tiny_en_de
    python pipelines/translate.py --model-dir DIR --input news.en --n-best 4 > news.nbest

With --n-best K, each source gives K lines `INDEX ||| TRANSLATION ||| SCORE` (Moses n-best
format, INDEX counting sources from 0), best first.
"""

from __future__ import annotations

import argparse
import os
import sys

from keras_transformer import artifacts


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    artifacts.add_model_arguments(parser)
    parser.add_argument(
        "--input", default=None, help="UTF-8 text file, one source per line (default: stdin)"
    )
    artifacts.add_search_arguments(parser)
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
    return parser.parse_args(argv)  # fmt: skip


def read_lines(path: str | None) -> list[str]:
    if path is None:
        return [line.rstrip("\n") for line in sys.stdin]
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    from keras_transformer import artifacts
    from keras_transformer.decoding import Translator

    lines = read_lines(args.input)
    model, config, tokenizer = artifacts.load_trained(args.model_dir, weights=args.weights)
    translator = Translator(model, tokenizer, config, beam_size=args.beam_size,
                            alpha=args.alpha, max_extra_length=args.max_extra_length)  # fmt: skip
    outputs, scores = translator.translate(lines, batch_size=args.batch_size, n_best=args.n_best)
    for index, (output, score) in enumerate(zip(outputs, scores)):
        if args.n_best is not None:
            for text, value in zip(output, score):
                print(f"{index} ||| {text} ||| {value:.6f}")
        elif args.scores:
            print(f"{score:.6f}\t{output}")
        else:
            print(output)


if __name__ == "__main__":
    main(sys.argv[1:])
