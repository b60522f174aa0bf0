"""Check a SavedModel export against the in-process Translator on a dataset split.

    keras-transformer-verify-export --model-dir runs/sample_en_de \
        --export-dir runs/sample_en_de/export/transformer/1 --dataset sample_en_de --split test

(or `python export/verify_export.py ...`). Both translate the same batches with the same beam
settings (give the flags and --weights the export was made with); it prints the number of
sentences whose translation differs (should be 0) and the largest score difference, and exits
with status 1 on any mismatch. Run it before rolling a new version out, on a serving machine:
it also names each kernel layout the export chose that this machine's CPU would not (a
matter of speed, not of the exit status).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from keras_transformer.cli import common


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    common.add_model_arguments(parser)
    parser.add_argument("--export-dir", required=True, help="an exported version directory")
    parser.add_argument("--dataset", default="sample_en_de", help="dataset whose sources to use")
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"), help="split")
    parser.add_argument("--limit", type=int, default=None, help="first N sentences only")
    common.add_search_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per call")
    return parser


def verify(args: argparse.Namespace) -> int:
    from keras_transformer import artifacts
    from keras_transformer.data import corpus
    from keras_transformer.serving.export import read_export_info
    from keras_transformer.serving.verify import compare, layout_notes, machine_layout

    search = common.search_options(args)
    sources = [s for s, _ in corpus.read_pairs(args.dataset, args.split, limit=args.limit)]
    if not sources:
        raise ValueError(
            f"No sentences to compare. Received: dataset={args.dataset!r}, "
            f"split={args.split!r}, limit={args.limit!r}"
        )
    result = compare(
        args.model_dir, args.export_dir, sources, search, args.weights, args.batch_size
    )
    print(
        f"{result['sentences']} sentences, {len(result['mismatches'])} mismatches "
        f"(first: {result['mismatches'][:10]}), max |score difference| "
        f"{result['max_score_diff']:.2e}"
    )
    info = read_export_info(args.export_dir)
    if info:
        d_model = artifacts.load_config(args.model_dir).d_model
        for note in layout_notes(info, machine_layout(d_model, bool(info.get("jit_compile")))):
            print(note)
    return 1 if result["mismatches"] else 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), verify, argv)


if __name__ == "__main__":
    sys.exit(main())
