"""Score translation pairs with a trained model: log P(target | source), teacher-forced.

    keras-transformer-score --model-dir runs/sample_en_de < pairs.tsv > scores.tsv
    keras-transformer-score --model-dir DIR --input pairs.tsv --alpha 0.6 --json

(or `python pipelines/score.py ...`). Each input line is `source<TAB>target`; each output line,
in input order, is `log_prob<TAB>per_token<TAB>score`: the target's log-probability given the
source (its pieces and EOS predicted by one full forward pass, as in training), that divided by
the number of predicted tokens n, and the length-penalized score log_prob / ((5 + n) / 6) **
alpha by which beam search ranks its hypotheses (scoring a translation printed by
keras-transformer-translate gives back its score). Pairs are scored in batches of similar
length, with a progress bar on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from keras_transformer.cli import common
from keras_transformer.config import SearchOptions


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    common.add_model_arguments(parser)
    parser.add_argument(
        "--input", default=None, help="UTF-8 file of source<TAB>target lines (default: stdin)"
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=SearchOptions().alpha,
        help="length penalty exponent of the score column (default: %(default)s, the paper's)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="pairs per batch")
    parser.add_argument("--json", action="store_true", help="one JSON object per pair")
    return parser


def score(args: argparse.Namespace) -> int:
    from keras_transformer import artifacts
    from keras_transformer.decoding import score_pairs
    from keras_transformer.serving.client import format_results

    search = SearchOptions(alpha=args.alpha)
    sources, targets = common.split_pairs(common.read_lines(args.input))
    model, _, tokenizer = artifacts.load_trained(args.model_dir, weights=args.weights)
    scores = score_pairs(model, tokenizer, sources, targets, search, args.batch_size, progress=True)
    outputs = {key: value.tolist() for key, value in scores.items()}
    for line in format_results(sources, outputs, args.json, targets=targets):
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), score, argv)


if __name__ == "__main__":
    sys.exit(main())
