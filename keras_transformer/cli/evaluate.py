"""Decode a test set with beam search and report sacrebleu BLEU and chrF.

    keras-transformer-evaluate --model-dir runs/tiny_en_de --dataset sample_en_de \
        --split test --beam-size 4 --alpha 0.6 --output runs/tiny_en_de/test.hyp.txt

(or `python pipelines/evaluate.py ...`). Prints BLEU (sacrebleu's standard 13a tokenization)
and chrF with their signatures, and a paper-style tokenized BLEU (sacrebleu's "intl"
tokenizer), see `keras_transformer.decoding.evaluation`.

Each source line is one sentence unless --segment splits it (a line that holds a paragraph);
--documents 2-12 joins lines into documents and reports document BLEU beside the BLEU of the
lines translated one by one:

    keras-transformer-evaluate --model-dir runs/sample_en_de --documents 2-12 --segment

--markup: sources and references carry inline tags (the bundled dev.tagged files that the
corpus script builds, or the hand-tagged benchmarks/data/tagged_dev.tsv): each source is
translated with its tags (`translate_markup`) and the report gives the share of well-formed
outputs and of outputs whose tags equal the source's, chrF inside tags and BLEU without tags
(`keras_transformer.decoding.markup_evaluation`); alignments read the run's
`artifacts.run_alignment` (its guided head where it trained one).

    keras-transformer-evaluate --model-dir RUN --split all --markup \
        --dataset tsv:keras_transformer/data/sample/en_de.dev.tagged.tsv.gz
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from keras_transformer.cli import common


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    common.add_model_arguments(parser)
    parser.add_argument(
        "--dataset",
        default="sample_en_de",
        help="sample_en_de | sample_en_fr | wmt14_en_de | wmt14_en_fr | "
        "tsv:PATH | text:SRC,TGT (default: %(default)s)",
    )
    parser.add_argument(
        "--split",
        default="test",
        choices=("train", "dev", "test", "all"),
        help="split to decode; all: a whole tsv: or text: file (default: %(default)s)",
    )
    parser.add_argument(
        "--reverse",
        action="store_true",
        help="swap source and target (a model trained with --reverse)",
    )
    parser.add_argument("--data-dir", default=None, help="TFDS data directory (WMT datasets)")
    common.add_search_arguments(parser)
    common.add_dtype_argument(parser)
    parser.add_argument("--batch-size", type=int, default=64, help="sources per batch")
    parser.add_argument(
        "--limit", type=int, default=None, help="decode only the first N pairs (default: all)"
    )
    parser.add_argument("--output", default=None, help="write the hypotheses here, one per line")
    parser.add_argument("--json", default=None, help="also write the figures as JSON here")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    common.add_document_arguments(parser, segment_by_default=False)
    parser.add_argument(
        "--documents", default=None, metavar="MIN-MAX",
        help="document BLEU: join consecutive lines into documents of MIN to MAX lines "
        "(e.g. 2-12), translate each document whole (with --segment: split into sentences) "
        "and report its BLEU beside the BLEU of the same lines translated one by one and "
        "joined",
    )  # fmt: skip
    parser.add_argument("--markup", action="store_true", help="tagged sources and references")
    parser.add_argument(
        "--document-join", choices=("space", "newline"), default="space",
        help="what joins the lines of a document (default: %(default)s)",
    )  # fmt: skip
    return parser


def _document_lines(value: str) -> tuple[int, int]:
    low, _, high = value.partition("-")
    try:
        return int(low), int(high or low)
    except ValueError:
        raise ValueError(
            f"--documents must be MIN-MAX lines, e.g. 2-12. Received: {value!r}"
        ) from None


def evaluate_documents(args: argparse.Namespace, model, tokenizer, pairs, search) -> int:
    from keras_transformer.decoding.evaluation import DocumentGrouping, evaluate_documents

    separator = {"space": " ", "newline": "\n"}[args.document_join]
    grouping = DocumentGrouping(_document_lines(args.documents), separator)
    result = evaluate_documents(
        model, tokenizer, pairs, search, common.document_options(args), grouping,
        batch_size=args.batch_size, progress=not args.no_progress,
    )  # fmt: skip
    hypotheses = result.pop("hypotheses")
    print(f"documents: {result['num_documents']} of {args.documents} lines "
          f"({result['num_lines']} lines, joined by {args.document_join})")  # fmt: skip
    for name in ("document", "lines"):
        print(f"{name:>8}: {result[name]['bleu_text']}  chrF {result[name]['chrf']:.2f}")
    _write_results(args, hypotheses, result)
    return 0


def _write_results(args: argparse.Namespace, hypotheses: list[str], result: dict) -> None:
    """`--output`: the hypotheses, a line each; `--json`: the scores."""
    from keras_transformer.decoding.evaluation import write_lines

    if args.output:
        write_lines(args.output, hypotheses)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


def evaluate_markup(args: argparse.Namespace, model, tokenizer, pairs, search) -> int:
    from keras_transformer import artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_evaluation import tag_scores
    from keras_transformer.decoding.markup_translation import translate_lines

    translator = Translator(model, tokenizer, search, documents=common.document_options(args),
                            alignment=artifacts.run_alignment(args.model_dir))  # fmt: skip
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    outputs, _ = translate_lines(translator, sources, True, args.batch_size,
                                 not args.no_progress)  # fmt: skip
    hypotheses = [text for text, _, _ in outputs]
    result = tag_scores(sources, references, hypotheses)
    result["warnings"] = sum(bool(warning) for _, _, warning in outputs)
    print(", ".join(f"{k} {v:.4g}" for k, v in result.items()))
    _write_results(args, hypotheses, result)
    return 0


def evaluate(args: argparse.Namespace) -> int:
    from keras_transformer import artifacts
    from keras_transformer.data.corpus import read_pairs
    from keras_transformer.decoding.evaluation import evaluate_bleu, format_report

    search = common.search_options(args)
    model, _, tokenizer = artifacts.load_trained(
        args.model_dir, weights=args.weights, dtype=args.dtype
    )
    options = dict(data_dir=args.data_dir, limit=args.limit, reverse=args.reverse)
    pairs = list(read_pairs(args.dataset, args.split, **options))
    if not pairs:
        raise ValueError(
            f"No sentence pairs to evaluate. Received: dataset={args.dataset!r}, "
            f"split={args.split!r}, limit={args.limit!r}"
        )
    if args.documents:
        return evaluate_documents(args, model, tokenizer, pairs, search)
    if args.markup:
        return evaluate_markup(args, model, tokenizer, pairs, search)
    result = evaluate_bleu(
        model, tokenizer, pairs, search, batch_size=args.batch_size,
        output_path=args.output, progress=not args.no_progress,
        documents=common.document_options(args),
    )  # fmt: skip
    result.update(dataset=args.dataset, split=args.split, model_dir=args.model_dir)
    print(format_report(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), evaluate, argv)


if __name__ == "__main__":
    sys.exit(main())
