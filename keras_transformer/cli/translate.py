"""Translate lines with a trained model: one source per line in, one line per source out, in
input order.

    echo "The cat sleeps." | keras-transformer-translate --model-dir runs/sample_en_de
    keras-transformer-translate --model-dir DIR --input news.en > news.de
    keras-transformer-translate --model-dir DIR --input news.en --n-best 4 > news.nbest.tsv
    keras-transformer-translate --model-dir DIR --input news.en --sampling topp --seed 1
    keras-transformer-translate --model-dir DIR       # at a terminal: type, read, repeat

(or `python pipelines/translate.py ...`). Sources come from --input FILE (with a progress bar
on stderr) or stdin; when stdin is a terminal and no --input is given, each line is translated
as it is typed (Ctrl-D ends). Batches are formed by length internally; output follows the
input order. --scores prefixes each translation with its score and a tab; --n-best K prints K
lines per source, `index<TAB>rank<TAB>score<TAB>translation` (TSV, sources counted from 0, best
first). Beam search with the paper's settings is the default; --sampling greedy|topk|topp
decodes greedily or samples (--temperature, --top-k, --top-p; the same --seed and input give
the same output). Scores are log P(y | x) / ((5 + |y|) / 6) ** alpha either way.

Each line is a whole input (a sentence or a paragraph): it is split into sentences, all
sentences are translated in length-sorted batches and each line's translations are joined
back in order; its score is the sum of its sentences' scores, and its k-th best joins each
sentence's k-th best (--no-segment: one sentence per line, as before).

--markup: lines carry inline XML/HTML tags, which come back around the aligned words, and
protected spans (URLs, numbers, placeholders, key combinations) come back verbatim; a line
whose tags do not nest is translated as text with a warning on stderr. --whole-input reads
the whole file (or stdin) as one source, so an HTML page whose elements span lines is one
input (its line breaks and indentation come back where they were):

    keras-transformer-translate --model-dir DIR --markup --whole-input --input page.html

--alignments appends a tab and the Moses "i-j" word alignments (source word i, output word
j) to each line. Guides (`cli/guides.py`): --prefix, --alternatives K, --constraints,
--avoid, --glossary FILE.tsv, and per-line values from extra TSV columns with
--guide-columns.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from keras_transformer.cli import common, guides


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    common.add_model_arguments(parser)
    parser.add_argument(
        "--input", default=None, help="UTF-8 text file, one source per line (default: stdin)"
    )
    common.add_search_arguments(parser)
    common.add_dtype_argument(parser)
    parser.add_argument(
        "--n-best",
        type=int,
        default=None,
        help="print the K best translations per source as TSV (K <= beam size; beam search)",
    )
    parser.add_argument(
        "--scores",
        action="store_true",
        help="1-best output: prefix each line with its score and a tab",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="sources per batch")
    parser.add_argument("--markup", action="store_true", help="inputs carry inline tags")
    parser.add_argument(
        "--whole-input",
        action="store_true",
        help="read the whole input (file or stdin) as one source, line breaks kept, e.g. an "
        "HTML page with --markup; its translation is printed as it comes (line breaks kept)",
    )
    parser.add_argument("--alignments", action="store_true", help="append Moses alignments")
    common.add_sampling_arguments(parser)
    common.add_document_arguments(parser, segment_by_default=True)
    guides.add_guide_arguments(parser)
    return parser


def _decoder(args: argparse.Namespace, search, sampling: dict | None) -> Callable:
    """Load the model; returns `decode(lines, progress) -> (outputs, scores)`."""
    from keras_transformer import artifacts
    from keras_transformer.decoding import Translator

    model, _, tokenizer = artifacts.load_trained(
        args.model_dir, weights=args.weights, dtype=args.dtype
    )
    translator = Translator(model, tokenizer, search, documents=common.document_options(args),
                            alignment=artifacts.run_alignment(args.model_dir))  # fmt: skip
    if args.markup or args.alignments:
        from keras_transformer.decoding.markup_translation import translate_lines

        return lambda lines, progress: translate_lines(
            translator, lines, args.markup, args.batch_size, progress
        )
    if guides.has_guides(args):
        return guides.guided_decoder(translator, args)
    if sampling:
        return lambda lines, progress: translator.sample(
            lines, batch_size=args.batch_size, progress=progress, **sampling
        )
    return lambda lines, progress: translator.translate(
        lines, batch_size=args.batch_size, n_best=args.n_best, progress=progress
    )


def _write(sources, outputs, scores, args: argparse.Namespace, start: int = 0) -> None:
    from keras_transformer.serving.client import format_results

    # A whole input's translation ends as the input ends (its own final line break or none).
    end = "" if args.whole_input and not args.alignments else "\n"

    if outputs and isinstance(outputs[0], tuple):  # --markup / --alignments
        for index, (text, links, warning) in enumerate(outputs):
            if warning:
                where = "input" if end == "" else f"line {start + index + 1}"
                print(f"{where}: {warning}", file=sys.stderr)
            score = f"{scores[index]:.4f}\t" if args.scores else ""
            print(score + text + (f"\t{links}" if args.alignments else ""), end=end, flush=True)
        return
    if args.n_best is None and not args.scores and not getattr(args, "alternatives", None):
        lines = outputs
    else:
        results = {"translations": outputs, "scores": scores}
        lines = format_results(sources, results, start=start)
    for line in lines:
        print(line, end=end, flush=True)


def _interactive(decode: Callable, args: argparse.Namespace) -> int:
    print("Type a sentence and press Enter; Ctrl-D ends.", file=sys.stderr)
    index = 0
    while True:
        print("> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:  # end of input
            print(file=sys.stderr)
            return 0
        source = [line.rstrip("\n")]
        _write(source, *decode(source, False), args, start=index)
        index += 1


def translate(args: argparse.Namespace) -> int:
    from keras_transformer.decoding.sampling import check_sampling_args

    # Flags are checked first (n_best against the beam size), before input and the slow load.
    search = common.search_options(args, n_best=args.n_best or 1)
    sampling = common.sampling_options(args)
    if (args.markup or args.alignments) and (sampling or args.n_best is not None):
        raise ValueError("--markup and --alignments need 1-best beam search.")
    if (args.markup or args.alignments) and guides.has_guides(args):
        raise ValueError(
            "--markup and --alignments take no guides (--prefix, --alternatives, "
            "--constraints, --avoid, --glossary, --guide-columns): use one or the other."
        )
    if args.whole_input and (args.n_best is not None or getattr(args, "alternatives", None)):
        raise ValueError("--whole-input prints one translation: drop --n-best/--alternatives.")
    if sampling:
        if args.n_best is not None:
            raise ValueError("--n-best needs beam search: drop --sampling or --n-best.")
        check_sampling_args(sampling["method"], sampling["top_k"], sampling["top_p"],
                            sampling["temperature"])  # fmt: skip
    decode = _decoder(args, search, sampling)
    if args.input is None and sys.stdin.isatty() and not args.whole_input:
        return _interactive(decode, args)
    lines = [common.read_text(args.input)] if args.whole_input else common.read_lines(args.input)
    _write(lines, *decode(lines, args.input is not None), args)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), translate, argv)


if __name__ == "__main__":
    sys.exit(main())
