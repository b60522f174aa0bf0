"""Word-align a training split with eflomal, for `--guided-alignment`
(`keras_transformer.training.guided_alignment`; needs `pip install 'keras-transformer[align]'`).

    python pipelines/align_corpus.py --dataset tsv:train.tsv          # -> train.tsv.align
    python pipelines/align_corpus.py --output sample.align            # the bundled corpus
    python pipelines/train_wmt.py --guided-alignment sample.align

The train split of --dataset (as training reads it: the same --dataset, --reverse and
--data-dir) is aligned by eflomal in both directions over whitespace words, the two are
symmetrized (--symmetrize, default grow-diag-final-and) and written as one Moses "i-j" line per
pair, in the split's order, to --output (default: beside a tsv:/text: corpus, its train file's
name + ".align").
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from keras_transformer.cli import common

SUFFIX = ".align"


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    parser.add_argument("--dataset", default="sample_en_de", help="as train's (%(default)s)")
    parser.add_argument("--reverse", action="store_true", help="swap source and target")
    parser.add_argument("--data-dir", help="TFDS data directory for the WMT datasets")
    parser.add_argument("--output", help="the alignment file (default: beside the corpus)")
    parser.add_argument(
        "--symmetrize", default="grow-diag-final-and",
        choices=("grow-diag-final-and", "intersection", "union"),
        help="how the two directions combine (%(default)s)",
    )  # fmt: skip
    return parser


def default_output(dataset: str) -> str:
    """Beside a `tsv:PATH` or `text:SRC,TGT` corpus: PATH (or SRC) + ".align"; a ValueError
    naming the dataset for the others."""
    for prefix in ("tsv:", "text:"):
        if dataset.startswith(prefix) and "+" not in dataset:
            return dataset[len(prefix) :].split(",")[0] + SUFFIX
    raise ValueError(f"Give --output for this dataset. Received: dataset={dataset!r}")


def align(args: argparse.Namespace) -> int:
    from keras_transformer.config import DataConfig
    from keras_transformer.data import corpus
    from keras_transformer.data.alignment_corpus import symmetrized_lines

    output = args.output or default_output(args.dataset)
    data = DataConfig(dataset=args.dataset, reverse=args.reverse, data_dir=args.data_dir)
    pairs = list(corpus.read_split(data, "train"))
    lines = symmetrized_lines([s for s, _ in pairs], [t for _, t in pairs], args.symmetrize)
    with open(output, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    print(f"{len(lines)} pairs aligned ({args.symmetrize}): --guided-alignment {output}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), align, argv)


if __name__ == "__main__":
    sys.exit(main())
