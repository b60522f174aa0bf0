"""Build the bundled en-de / en-fr sample corpus from the LibreOffice help pages.

Downloads the Debian packages libreoffice-help-en-us, -de and -fr (MPL-2.0) with
`apt-get download` into --work-dir, unpacks them there with `dpkg-deb -x`,
aligns paragraphs by page and id, and writes gzip TSV files plus NOTICE.md to
--out-dir. Run from the repository root:

    python pipelines/prepare_sample_corpus.py
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from keras_transformer.cli import common

# keras_transformer/data/sample of this installation (of the checkout, when installed with -e).
DEFAULT_OUT_DIR = Path(__file__).resolve().parents[1] / "data" / "sample"


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path("/tmp/keras_transformer_sample_corpus"),
        help="Scratch directory for the downloaded .deb files and their unpacked "
        "contents; never inside the repository (default: %(default)s).",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=DEFAULT_OUT_DIR,
        help="Where the *.tsv.gz files and NOTICE.md are written "
        "(default: keras_transformer/data/sample in this checkout).",
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        default=400,
        help="Drop a pair when either side has more characters than this (default: %(default)s).",
    )
    parser.add_argument(
        "--dev-fraction",
        type=float,
        default=0.03,
        help="Fraction of help pages (not lines) that go to dev (default: %(default)s).",
    )
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=0.05,
        help="Fraction of help pages (not lines) that go to test (default: %(default)s).",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="Skip `apt-get download` and use the .deb files already in --work-dir.",
    )
    return parser


def reproduce_command(args: argparse.Namespace) -> str:
    """The command line recorded in NOTICE.md: only the flags that shape the output."""
    return (
        "python pipelines/prepare_sample_corpus.py"
        f" --max-chars {args.max_chars}"
        f" --dev-fraction {args.dev_fraction}"
        f" --test-fraction {args.test_fraction}"
    )


def prepare(args: argparse.Namespace) -> int:
    from keras_transformer.data.sample_corpus import build_sample_corpus

    counts = build_sample_corpus(
        args.work_dir,
        args.out_dir,
        reproduce_command(args),
        max_chars=args.max_chars,
        dev_fraction=args.dev_fraction,
        test_fraction=args.test_fraction,
        offline=args.offline,
    )
    for name, per_split in counts.items():
        line = "  ".join(f"{split}={count}" for split, count in per_split.items())
        print(f"{name}: {line}  total={sum(per_split.values())}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), prepare, argv, tensorflow=False)


if __name__ == "__main__":
    sys.exit(main())
