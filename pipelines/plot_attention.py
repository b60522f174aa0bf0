"""Draw the attention of a trained model on one sentence as a heat map (paper, figures 3-5).

    python pipelines/plot_attention.py --model-dir runs/tiny_en_de \
        --sentence "The cat sleeps." --kind cross --layer -1 --output cross.png

--kind encoder: encoder self-attention over the source pieces. --kind cross: the decoder's
encoder-decoder attention while it writes the beam-search translation (rows: output pieces,
columns: source pieces). Without --head, all heads of the layer are drawn side by side.
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
    parser.add_argument(
        "--beam-size", type=int, default=4, help="beam width of the translation (cross only)"
    )
    parser.add_argument(
        "--alpha", type=float, default=0.6, help="length penalty of the translation (cross only)"
    )
    parser.add_argument("--output", default="attention.png", help="PNG file to write")
    return parser.parse_args(argv)  # fmt: skip


def main(argv: list[str]) -> str:
    args = parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    from keras_transformer import artifacts
    from keras_transformer.decoding.attention_maps import attention_maps, plot_attention

    model, config, tokenizer = artifacts.load_trained(args.model_dir, weights=args.weights)
    maps = attention_maps(model, tokenizer, config, args.sentence, kind=args.kind,
                          beam_size=args.beam_size, alpha=args.alpha)  # fmt: skip
    path = plot_attention(maps, layer=args.layer, head=args.head, output_path=args.output)
    if maps.translation:
        print(f"translation: {maps.translation}")
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main(sys.argv[1:])
