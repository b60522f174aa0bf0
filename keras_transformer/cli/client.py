"""Query a TensorFlow Serving model server that serves the exported Transformer.

    keras-transformer-client --server localhost:8500 --model transformer "Hello world"
    keras-transformer-client --rest http://localhost:8501 --n-best "Hello world"
    keras-transformer-client --sampling topp --top-p 0.9 --seed 7 "Hello world"
    printf 'Hello world\\tHallo Welt\\n' | keras-transformer-client --score
    cat sentences.txt | keras-transformer-client --server localhost:8500 --timeout 30

(or `python export/client.py ...`). Output: `score<TAB>translation` per input; with --n-best,
`input<TAB>rank<TAB>score<TAB>translation` per hypothesis, inputs numbered from 0 across
batches; with --score (stdin lines `source<TAB>target`), `log_prob<TAB>per_token<TAB>score`
per pair; --json: one object per input. --sampling asks the `translate_sample` signature and
sends all four of its sampling inputs. Retries with exponential backoff only while the server
is UNAVAILABLE; any other failure prints `error: CODE: details (target)` to stderr and exits
with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from keras_transformer import logging_utils
from keras_transformer.cli import common
from keras_transformer.serving.signatures import (
    NBEST_SIGNATURE,
    PAIR_SIGNATURES,
    SAMPLE_SIGNATURE,
    SCORE_SIGNATURE,
    SERVING_SIGNATURE,
    sampling_inputs,
)

SERVING_ERROR_STATUS = 1


def build_parser() -> argparse.ArgumentParser:
    parser = common.make_parser(__doc__)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--server", default="localhost:8500", help="gRPC host:port")
    where.add_argument("--rest", default=None, help="REST base URL, e.g. http://localhost:8501")
    parser.add_argument("--model", default="transformer", help="model name on the server")
    parser.add_argument("--version", type=int, default=None, help="default: latest served")
    parser.add_argument("--signature", default=None, help=f"default: {SERVING_SIGNATURE}")
    parser.add_argument("--n-best", action="store_true", help=f"use {NBEST_SIGNATURE}")
    parser.add_argument(
        "--score",
        action="store_true",
        help=f"use {SCORE_SIGNATURE}: each input is source<TAB>target",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="deadline per request (s)")
    parser.add_argument("--retries", type=int, default=3, help="retries when UNAVAILABLE")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per request")
    parser.add_argument("--json", action="store_true", help="one JSON object per input")
    parser.add_argument("texts", nargs="*", help="sentences (default: lines of stdin)")
    common.add_sampling_arguments(parser)
    return parser


def _signature(args: argparse.Namespace) -> str:
    modes = {"--n-best": args.n_best, "--sampling": args.sampling, "--score": args.score}
    given = ["--signature"] * bool(args.signature) + [flag for flag, on in modes.items() if on]
    if len(given) > 1:
        raise ValueError(
            "Give at most one of --signature, --n-best, --sampling, --score. "
            f"Received: {', '.join(given)}"
        )
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1. Received: --batch-size {args.batch_size}")
    if args.signature:
        return args.signature
    if args.n_best:
        return NBEST_SIGNATURE
    if args.sampling:
        return SAMPLE_SIGNATURE
    return SCORE_SIGNATURE if args.score else SERVING_SIGNATURE


def query(args: argparse.Namespace) -> int:
    signature = _signature(args)
    sampling = common.sampling_options(args)
    if sampling:
        sampling_inputs(**sampling)  # a bad value fails here, before any request
    if not args.rest and not args.debug:
        logging_utils.import_tensorflow_quietly()  # gRPC requests are built with TensorFlow
    from keras_transformer.serving.client import (
        ServingError,
        format_results,
        predict_grpc,
        predict_rest,
    )

    texts = args.texts or [line.rstrip("\n") for line in sys.stdin]
    targets = None
    if signature in PAIR_SIGNATURES:  # score, align: source<TAB>target
        texts, targets = common.split_pairs(texts)
    options = dict(model_name=args.model, signature=signature, timeout=args.timeout,
                   retries=args.retries, version=args.version, sampling=sampling)  # fmt: skip
    for start in range(0, len(texts), args.batch_size):
        batch = texts[start : start + args.batch_size]
        batch_targets = None if targets is None else targets[start : start + args.batch_size]
        try:
            if args.rest:
                outputs = predict_rest(args.rest, batch, targets=batch_targets, **options)
            else:
                outputs = predict_grpc(args.server, batch, targets=batch_targets, **options)
        except ServingError as error:
            print(f"error: {common.error_line(error)}", file=sys.stderr)
            return SERVING_ERROR_STATUS
        lines = format_results(batch, outputs, args.json, start=start, targets=batch_targets)
        print("\n".join(lines), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), query, argv, tensorflow=False)


if __name__ == "__main__":
    sys.exit(main())
