"""Tokenize a training corpus once into sharded TFRecords of ids, for
`python pipelines/train_wmt.py --dataset prepared:DIR` (`keras_transformer.data.prepared`).

    python pipelines/prepare_data.py --dataset tsv:train.tsv --vocab runs/a/spm.model \\
        --output-dir data/prepared
    python pipelines/prepare_data.py --dataset wmt14_en_de --vocab-size 32000 --output-dir wmt

The train split of --dataset (any training dataset spec) is read, tokenized with --vocab (the
run's SentencePiece model; without it one is trained on the split as training would, with
--vocab-size pieces) and written with the vocabulary and a manifest (its checksum, the shards'
sizes and length histograms, the corpus spec) to --output-dir. A run on `prepared:DIR` reads
dev and test from the corpus spec, refuses another vocabulary, and resumes by a seek.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from keras_transformer.cli import common


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    parser.add_argument("--dataset", required=True, help="the corpus, as train's --dataset")
    parser.add_argument("--output-dir", required=True, help="where shards and manifest go")
    parser.add_argument("--vocab", help="the run's SentencePiece model (default: train one)")
    parser.add_argument(
        "--vocab-size", type=int, default=8000, help="pieces of a trained vocabulary (%(default)s)"
    )
    parser.add_argument("--reverse", action="store_true", help="swap source and target")
    parser.add_argument("--data-dir", help="TFDS data directory for the WMT datasets")
    parser.add_argument(
        "--examples-per-shard", type=int, default=500_000,
        help="pairs per TFRecord shard, bucketed on its own: each epoch leaves out up to one "
        "partial batch per length bucket and shard (about 2%% at the paper's 25000-token "
        "batches), workers read disjoint shards, a resume rebuilds one shard's batches "
        "(default: %(default)s)",
    )  # fmt: skip
    return parser


def prepare(args: argparse.Namespace) -> int:
    from keras_transformer.data import corpus, prepared
    from keras_transformer.data.tokenizer import train_sentencepiece

    vocab = args.vocab
    if vocab is None:
        os.makedirs(args.output_dir, exist_ok=True)
        vocab = os.path.join(args.output_dir, "spm.model")  # prepare keeps it there
        pairs = corpus.read_pairs(
            args.dataset, "train", data_dir=args.data_dir, limit=400_000, reverse=args.reverse
        )
        train_sentencepiece((side for pair in pairs for side in pair), vocab, args.vocab_size)
    manifest = prepared.prepare(
        args.dataset, args.output_dir, vocab, reverse=args.reverse, data_dir=args.data_dir,
        examples_per_shard=args.examples_per_shard,
    )  # fmt: skip
    print(
        f"{manifest.examples} pairs in {len(manifest.shards)} shards: "
        f"--dataset prepared:{args.output_dir}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), prepare, argv)


if __name__ == "__main__":
    sys.exit(main())
