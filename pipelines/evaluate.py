"""Decode a test set with beam search and report sacrebleu BLEU and chrF.

    python pipelines/evaluate.py --model-dir runs/tiny_en_de --dataset sample_en_de \
        --split test --beam-size 4 --alpha 0.6 --output runs/tiny_en_de/test.hyp.txt

Prints BLEU (sacrebleu's standard 13a tokenization) and chrF with their signatures, and a
paper-style tokenized BLEU (sacrebleu's "intl" tokenizer), see
`keras_transformer.decoding.evaluation`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from keras_transformer import artifacts
from keras_transformer.logging_utils import setup_logging


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    artifacts.add_model_arguments(parser)
    parser.add_argument(
        "--dataset",
        default="sample_en_de",
        help="sample_en_de | sample_en_fr | wmt14_en_de | wmt14_en_fr | "
        "tsv:PATH (default: %(default)s)",
    )
    parser.add_argument(
        "--split",
        default="test",
        choices=("train", "dev", "test"),
        help="split to decode (default: %(default)s)",
    )
    parser.add_argument("--data-dir", default=None, help="TFDS data directory (WMT datasets)")
    artifacts.add_search_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=64, help="sources per batch")
    parser.add_argument(
        "--limit", type=int, default=None, help="decode only the first N pairs (default: all)"
    )
    parser.add_argument("--output", default=None, help="write the hypotheses here, one per line")
    parser.add_argument("--json", default=None, help="also write the figures as JSON here")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser.parse_args(argv)  # fmt: skip


def main(argv: list[str]) -> dict:
    args = parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    setup_logging()
    from keras_transformer import artifacts
    from keras_transformer.data.corpus import read_pairs
    from keras_transformer.decoding.evaluation import evaluate_bleu, format_report

    model, config, tokenizer = artifacts.load_trained(args.model_dir, weights=args.weights)
    pairs = list(read_pairs(args.dataset, args.split, data_dir=args.data_dir, limit=args.limit))
    result = evaluate_bleu(
        model, tokenizer, config, pairs, beam_size=args.beam_size, alpha=args.alpha,
        batch_size=args.batch_size, max_extra_length=args.max_extra_length,
        output_path=args.output, progress=not args.no_progress,
    )  # fmt: skip
    result.update(dataset=args.dataset, split=args.split, model_dir=args.model_dir)
    print(format_report(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
