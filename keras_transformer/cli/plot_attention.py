"""Draw the attention of a trained model on one sentence as a heat map (paper, figures 3-5).

    keras-transformer-plot-attention --model-dir runs/tiny_en_de \
        --sentence "The cat sleeps." --kind cross --layer -1 --output cross.png

(or `python pipelines/plot_attention.py ...`). --kind encoder: encoder self-attention over the
source pieces. --kind cross: the decoder's encoder-decoder attention while it writes the
beam-search translation (rows: output pieces, columns: source pieces). Without --head, all
heads of the layer are drawn side by side.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from keras_transformer.cli import common


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    common.add_model_arguments(parser)
    parser.add_argument("--sentence", required=True, help="the source sentence")
    parser.add_argument(
        "--kind",
        default="cross",
        choices=("encoder", "cross"),
        help="encoder self-attention or decoder cross-attention (default: %(default)s)",
    )
    parser.add_argument(
        "--layer",
        type=int,
        default=-1,
        help="layer index from 0; negative counts from the last (default: %(default)s)",
    )
    parser.add_argument(
        "--head", type=int, default=None, help="head index from 0 (default: all heads of the layer)"
    )
    common.add_search_arguments(parser)  # the translation of --kind cross
    parser.add_argument("--output", default="attention.png", help="PNG file to write")
    return parser


def plot(args: argparse.Namespace) -> int:
    from keras_transformer import artifacts
    from keras_transformer.decoding.attention_maps import attention_maps, plot_attention

    search = common.search_options(args)
    model, _, tokenizer = artifacts.load_trained(args.model_dir, weights=args.weights)
    maps = attention_maps(model, tokenizer, args.sentence, kind=args.kind, search=search)
    path = plot_attention(maps, layer=args.layer, head=args.head, output_path=args.output)
    if maps.translation:
        print(f"translation: {maps.translation}")
    print(f"wrote {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), plot, argv)


if __name__ == "__main__":
    sys.exit(main())
