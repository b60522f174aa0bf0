"""Export a trained model directory as a SavedModel that stock TensorFlow Serving can load.

    keras-transformer-export --model-dir runs/en_de --export-base serving/models
    # -> serving/models/transformer/<version>/  (TF Serving layout, integer versions)

(or `python export/export_savedmodel.py ...`, `python -m keras_transformer.cli.export ...`).
Prints the version directory and the op types of its graph. Beam size, alpha, the extra
output length and the n-best width are fixed in the export; see BUILD.md and
`keras_transformer.serving.export`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from keras_transformer.cli import common
from keras_transformer.serving.signatures import WIDTH_SIGNATURES

# The decoder's kernel layouts an export can be told (the same translations, a matter of speed)
LAYOUT_FLAGS = {
    "--pad-kernels": "multiply the search's steps by padded copies of the decoder's kernels "
    "(faster on CPUs whose products stop at AVX2; decoding/padded_kernels.py; "
    "KERAS_TRANSFORMER_PAD_KERNELS overrides auto)",
    "--transpose-kernels": "with --jit-compile: the search reads the decoder's kernels in "
    "(out, in) order (faster at d_model 512 and more on the AVX2-only CPUs measured, slower on "
    "AVX-512 ones; decoding/incremental.py; KERAS_TRANSFORMER_TRANSPOSE_KERNELS overrides "
    "auto)",
}
LAYOUT_CHOICES = {"auto": None, "on": True, "off": False}


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    common.add_model_arguments(parser)
    parser.add_argument("--export-base", required=True, help="TF Serving base path's parent")
    parser.add_argument(
        "--model-name", default="transformer", help="model name clients use (directory name)"
    )
    parser.add_argument("--version", type=int, default=None, help="default: latest + 1")
    common.add_search_arguments(parser)
    parser.add_argument(
        "--n-best", type=int, default=4, help="width of translate_nbest (default: %(default)s)"
    )
    parser.add_argument("--jit-compile", action="store_true", help="XLA for numeric decoding")
    common.add_dtype_argument(parser)
    for flag, what in LAYOUT_FLAGS.items():
        parser.add_argument(
            flag, choices=tuple(LAYOUT_CHOICES), default="auto",
            help=f"{what}; auto: the rule for the machine that exports, on/off: for the "
            "servers' CPUs. The choice is printed and kept in "
            "assets.extra/export_info.json (default: %(default)s)",
        )  # fmt: skip
    parser.add_argument(
        "--warm-widths", choices=tuple(WIDTH_SIGNATURES), default="all",
        help="with --jit-compile: which signatures the warm-up records (replayed by TF Serving "
        "as it loads the version) send one sentence of every source width, so that no "
        "one-sentence request compiles the search while served: all (serving_default, "
        "translate_nbest, translate_sample; translate_markup runs serving_default's search), "
        "serving_default, or none. "
        "The compiles move to the server's load: measured on 2 cores, 22 -> 82 s for the "
        "default run's model, 82 -> 234 s at base size (benchmarks/results/"
        "2026-11-28-xla-warmup-buckets.md) (default: %(default)s)",
    )  # fmt: skip
    common.add_document_arguments(parser, segment_by_default=True)
    parser.add_argument(
        "--guided", action="store_true",
        help="add translate_guided and translate_alternatives (target prefix, alternatives, "
        "constraints, avoid, glossary; BUILD.md); they add to the export's tracing time; "
        "not with --jit-compile",
    )  # fmt: skip
    return parser


def export(args: argparse.Namespace) -> int:
    from keras_transformer.serving.export import export_savedmodel, read_export_info
    from keras_transformer.serving.op_check import saved_model_op_types

    if args.guided and args.jit_compile:  # the API leaves them out; a flag must not vanish
        raise ValueError(
            "--guided cannot be combined with --jit-compile: the guided search runs on growing "
            "buffers, outside XLA. Make a second export with --guided and without --jit-compile."
        )
    path = export_savedmodel(
        args.model_dir, args.export_base, args.model_name, args.version, args.weights,
        common.search_options(args), args.n_best, args.jit_compile,
        documents=common.document_options(args), dtype=args.dtype,
        pad_kernels=LAYOUT_CHOICES[args.pad_kernels], guided=args.guided,
        transpose_kernels=LAYOUT_CHOICES[args.transpose_kernels], warm_widths=args.warm_widths,
    )  # fmt: skip
    info = read_export_info(path)
    print(path)
    print(
        f"dtype: {info['dtype']}, padded kernels: {info['pad_kernels']}, XLA: "
        f"{info['jit_compile']}, transposed kernels: {info['transpose_kernels']}"
    )
    warmup = info.get("warmup", {})
    if warmup.get("signatures"):
        shapes = " ".join(f"{rows}x{pieces}" for rows, pieces in warmup["rows_and_pieces"])
        print(f"XLA warm-up: requests of rows x pieces {shapes} for {warmup['signatures']}")
    print("ops:", " ".join(sorted(saved_model_op_types(path))))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), export, argv)


if __name__ == "__main__":
    sys.exit(main())
