"""What every command shares: its parser with `--debug`, the model and search flags, flags
written from a config's fields (`add_config_arguments`), and `run`.

    def main(argv=None) -> int:
        parser = common.make_parser(__doc__)
        common.add_model_arguments(parser)
        common.add_search_arguments(parser)
        return common.run(parser, translate, argv)   # translate(args) -> exit status

Commands import TensorFlow and the heavy parts of the package inside their function, after
`run` has set up quiet logging, so `--help` is fast and TensorFlow's C++ start-up lines do not
reach the terminal.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import typing
from collections.abc import Callable, Sequence

from keras_transformer import logging_utils, malloc, onednn
from keras_transformer.config import (
    OVERLONG,
    QUICK_EVAL_ALPHA,
    STOP_LOOKAHEADS,
    DocumentOptions,
    SearchOptions,
)
from keras_transformer.constants import INFERENCE_DTYPES
from keras_transformer.training.errors import PreemptedError, exit_status

# Errors a user causes (a path that does not exist, a bad flag value, a missing extra): one
# line and exit status USER_ERROR_STATUS, as argparse does for bad flags. Others are bugs and
# keep their traceback.
USER_ERRORS = (ValueError, OSError, ImportError)
USER_ERROR_STATUS = 2
INTERRUPTED_STATUS = 130
# --sampling choice -> the method of `Translator.sample` / `signatures.sampling_inputs`
SAMPLING_CHOICES = {"greedy": "greedy", "topk": "top_k", "topp": "top_p"}


def make_parser(description: str | None) -> argparse.ArgumentParser:
    """An `ArgumentParser` showing `description` as written (a command's module docstring),
    with `--debug`."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show full tracebacks and TensorFlow's start-up logs",
    )
    return parser


def add_model_arguments(parser: argparse.ArgumentParser, weights: bool = True) -> None:
    """`--model-dir` and (unless `weights=False`) `--weights`, as every command that loads a
    trained model takes them."""
    parser.add_argument(
        "--model-dir",
        required=True,
        help="trained model directory (config.json, spm.model, weights)",
    )
    if weights:
        parser.add_argument(
            "--weights",
            default=None,
            help="a .weights.h5 file to load (default: final weights, else the latest checkpoint)",
        )


def add_dtype_argument(parser: argparse.ArgumentParser) -> None:
    """`--dtype`, the `artifacts.load_trained` dtype of commands that decode."""
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=INFERENCE_DTYPES,
        help="compute and weight dtype for decoding; bfloat16 pays on CPUs with bfloat16 "
        "matrix units (AMX, AVX512_BF16) and on GPUs (1.7x faster beam search for the base "
        "model on a 2-core AMX Xeon; slower on CPUs without them); the default run's test "
        "BLEU was the same in both (benchmarks/README.md) (default: %(default)s)",
    )


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """`--beam-size`, `--alpha`, `--max-extra-length`, `--stop-lookahead`, defaulting to
    `SearchOptions()` (the paper's inference settings) except `--alpha`: the run's
    (`artifacts.run_eval_alpha`);
    `search_options(args)` turns them back into one."""
    defaults = SearchOptions()
    parser.add_argument(
        "--beam-size",
        type=int,
        default=defaults.beam_size,
        help="beam width (default: %(default)s, the paper's)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="length penalty exponent (default: the alpha the run in --model-dir was "
        f"evaluated with: {QUICK_EVAL_ALPHA} for the quick preset, else the paper's "
        f"{defaults.alpha})",
    )
    parser.add_argument(
        "--max-extra-length",
        type=int,
        default=defaults.max_extra_length,
        help="output tokens allowed beyond the source length (default: %(default)s)",
    )
    parser.add_argument(
        "--stop-lookahead",
        choices=STOP_LOOKAHEADS,
        default=defaults.stop_lookahead,
        help="early stopping: 'limit' stops once no live beam could win at any length up to "
        "its limit (exact); 'next' once none could win by ending at the next step (fewer "
        "steps, a rare result may change) (default: %(default)s)",
    )


def search_options(args: argparse.Namespace, **changes) -> SearchOptions:
    """The `SearchOptions` of the flags of `add_search_arguments`, with `changes` on top
    (a bad value raises a ValueError that names it)."""
    alpha = args.alpha
    if alpha is None:
        from keras_transformer import artifacts

        alpha = artifacts.run_eval_alpha(args.model_dir)
    values = dict(beam_size=args.beam_size, alpha=alpha, max_extra_length=args.max_extra_length,
                  stop_lookahead=args.stop_lookahead)  # fmt: skip
    return SearchOptions(**{**values, **changes})


def add_document_arguments(parser: argparse.ArgumentParser, segment_by_default: bool) -> None:
    """How whole inputs are split (`DocumentOptions`): `--no-segment` (or `--segment` where
    inputs are sentences by default), `--overlong`, `--max-segment-pieces`,
    `--max-input-bytes`; `document_options(args)` turns them into one."""
    defaults = DocumentOptions()
    group = parser.add_argument_group("whole inputs (paragraphs, documents)")
    if segment_by_default:
        group.add_argument(
            "--no-segment", dest="segment", action="store_false",
            help="send each input whole instead of splitting it into sentences",
        )  # fmt: skip
    else:
        group.add_argument(
            "--segment", action="store_true",
            help="split each input into sentences, translate them and join the translations "
            "back with the input's own whitespace (default: each input is one sentence)",
        )  # fmt: skip
    group.add_argument(
        "--overlong", choices=OVERLONG, default=None,
        help="split: cut a sentence longer than --max-segment-pieces at piece boundaries "
        "(after a comma or semicolon where there is one) and translate every part; truncate: "
        "keep its first max_length - 1 pieces (default: split when segmenting, else truncate)",
    )  # fmt: skip
    group.add_argument(
        "--max-segment-pieces", type=int, default=None,
        help="the longest sentence sent to the model, in subword pieces (default: a quarter "
        "of the model's max_length, 32 for the quick preset)",
    )  # fmt: skip
    group.add_argument(
        "--max-input-bytes", type=int, default=defaults.max_input_bytes,
        help="refuse longer inputs, naming the limit (default: %(default)s)",
    )  # fmt: skip


def document_options(args: argparse.Namespace) -> DocumentOptions:
    """The `DocumentOptions` of the flags of `add_document_arguments` (ValueError names a bad
    value)."""
    overlong = args.overlong or ("split" if args.segment else "truncate")
    return DocumentOptions(
        segment=args.segment, overlong=overlong, max_segment_pieces=args.max_segment_pieces,
        max_input_bytes=args.max_input_bytes,
    )  # fmt: skip


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """`--sampling greedy|topk|topp` (default: beam search) and its knobs `--temperature`,
    `--top-k`, `--top-p`, `--seed`; `sampling_options(args)` turns them into keyword arguments
    of `Translator.sample` (and of the client's `translate_sample` requests)."""
    group = parser.add_argument_group("greedy decoding and sampling (instead of beam search)")
    group.add_argument(
        "--sampling",
        choices=list(SAMPLING_CHOICES),
        default=None,
        help="greedy: the most likely token each step; topk: sample among the --top-k most "
        "likely; topp: sample in the nucleus of probability mass --top-p",
    )
    group.add_argument(
        "--temperature", type=float, default=1.0, help="divides the logits (default: %(default)s)"
    )
    group.add_argument("--top-k", type=int, default=10, help="with topk (default: %(default)s)")
    group.add_argument("--top-p", type=float, default=0.9, help="with topp (default: %(default)s)")
    group.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the same seed and input give the same output (default: %(default)s)",
    )


def sampling_options(args: argparse.Namespace) -> dict | None:
    """`{"method", "temperature", "top_k", "top_p", "seed"}` from the flags of
    `add_sampling_arguments`, or None without `--sampling` (beam search)."""
    if args.sampling is None:
        return None
    return dict(
        method=SAMPLING_CHOICES[args.sampling], temperature=args.temperature,
        top_k=args.top_k, top_p=args.top_p, seed=args.seed,
    )  # fmt: skip


def _read_bytes(path: str | None) -> bytes:
    if path is None:
        stream = getattr(sys.stdin, "buffer", None)  # a text-only stdin (tests): decoded
        return stream.read() if stream is not None else sys.stdin.read().encode()
    with open(path, "rb") as f:
        return f.read()


def read_text(path: str | None) -> str:
    """A whole UTF-8 file, or stdin when `path` is None, as it is (line breaks kept); bytes
    that are not UTF-8 are a ValueError naming the file, the line and the byte (as
    `read_lines` names them)."""
    data = _read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        _decode_lines(data, "stdin" if path is None else path)  # raises, naming the line
        raise


def read_lines(path: str | None) -> list[str]:
    """The lines of a UTF-8 file, or of stdin when `path` is None, without newlines. A line
    that is not valid UTF-8 is a ValueError naming the file, the line and the first bad
    byte."""
    return _decode_lines(_read_bytes(path), "stdin" if path is None else path)


def _decode_lines(data: bytes, name: str) -> list[str]:
    lines = []
    for number, raw in enumerate(data.splitlines(), start=1):  # as text mode: \n, \r\n, \r
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{name} line {number} is not valid UTF-8: byte 0x{raw[error.start]:02x} at "
                f"byte {error.start + 1} of the line. Received: "
                f"line={raw.decode('utf-8', 'replace').rstrip()!r}"
            ) from None
    return lines


def split_pairs(lines: Sequence[str]) -> tuple[list[str], list[str]]:
    """`source<TAB>target` lines -> `(sources, targets)`; a line without a tab is a
    ValueError naming its number (from 1)."""
    sources, targets = [], []
    for number, line in enumerate(lines, start=1):
        source, tab, target = line.rstrip("\r").partition("\t")
        if not tab:
            raise ValueError(f"line {number} has no tab (expected source<TAB>target): {line!r}")
        sources.append(source)
        targets.append(target)
    return sources, targets


def error_line(error: BaseException) -> str:
    """`error` as one line: its message with whitespace runs (newlines too) made single
    spaces, or its type name when it has no message."""
    return " ".join(str(error).split()) or type(error).__name__


def run(
    parser: argparse.ArgumentParser,
    command: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None = None,
    tensorflow: bool = True,
) -> int:
    """Parse `argv`, set up logging and run `command(args)`; returns its exit status.

    Unless `--debug`: TensorFlow is imported first with its C++ start-up lines hidden (when
    `tensorflow`; a command that may not need it calls
    `logging_utils.import_tensorflow_quietly()` itself), and a user error (`USER_ERRORS`)
    prints one line `error: <message>` to stderr and returns `USER_ERROR_STATUS`. An error
    that ends a training run (`training.errors.exit_status`) prints one line too (`stopped:
    ...` for a preempted run, which wrote its checkpoint, even with `--debug`) and returns its
    status.
    """
    args = parser.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    onednn.prefer_onednn()  # before TensorFlow starts: it reads the choice once
    if tensorflow and not args.debug:
        logging_utils.import_tensorflow_quietly()
    logging_utils.setup_logging(logging.DEBUG if args.debug else logging.INFO)
    try:
        malloc.keep_freed_memory()  # before the command's first tensors
        return command(args)
    except USER_ERRORS as error:
        if args.debug:
            raise
        print(f"error: {error_line(error)}", file=sys.stderr)
        return USER_ERROR_STATUS
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    except RuntimeError as error:
        status = exit_status(error)
        preempted = isinstance(error, PreemptedError)
        if status is None or (args.debug and not preempted):
            raise
        print(flush=True)  # end the progress bar's line
        line = f"stopped: {error}" if preempted else f"error: {error_line(error)}"
        print(line, file=sys.stderr)
        return status
    except Exception as error:
        if args.debug or not _refused_by_graph(error):
            raise
        print(f"error: {graph_error_line(error)}", file=sys.stderr)  # a request refused
        return USER_ERROR_STATUS


def _refused_by_graph(error: BaseException) -> bool:
    """Whether `error` is TensorFlow's InvalidArgumentError: what the translate functions'
    input checks raise (INVALID_ARGUMENT when served), a user error, not a crash."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(error, tf.errors.InvalidArgumentError)


def graph_error_line(error: BaseException) -> str:
    """A TensorFlow error as one line: the failed assertion's message and values when it is
    one, without the op and function names around it."""
    message = getattr(error, "message", str(error))
    start = message.find("assertion failed:")
    if start >= 0:
        message = message[start:].split("\n\t [[", 1)[0]
    return error_line(message)


def add_config_arguments(
    parser: argparse.ArgumentParser, config_class: type
) -> dict[str, argparse._ArgumentGroup]:
    """One flag per field of each section of `config_class` (a dataclass of section
    dataclasses, as `TrainingConfig`), written from the field's metadata (`config.option`):
    its `help` with "(default: ...)", its `flag` (else `--field-name`), its `choices`, and the
    type of its annotation (`int | None`: int; a bool is a `store_true` switch). A flag left
    out sets no attribute (`given_values` tells the flags given from the defaults). Returns
    the argument group of each section, titled by the section's `title`."""
    groups = {}
    for section in dataclasses.fields(config_class):
        group = groups[section.name] = parser.add_argument_group(section.metadata["title"])
        types = typing.get_type_hints(section.default_factory)
        for field in dataclasses.fields(section.default_factory):
            _add_field_argument(group, field, types[field.name])
    return groups


def _add_field_argument(group, field: dataclasses.Field, annotation) -> None:
    text = field.metadata["help"].replace("%", "%%")  # argparse formats help with %
    flag = field.metadata.get("flag", "--" + field.name.replace("_", "-"))
    unset = argparse.SUPPRESS  # a flag left out sets nothing: the config's default applies
    if annotation is bool:
        group.add_argument(flag, dest=field.name, action="store_true", default=unset, help=text)
        return
    kind = next(t for t in typing.get_args(annotation) or (annotation,) if t is not type(None))
    group.add_argument(
        flag, dest=field.name, type=kind, default=unset,
        choices=field.metadata.get("choices"), help=f"{text} (default: {field.default})",
    )  # fmt: skip


def given_values(args: argparse.Namespace, config_class: type) -> dict:
    """`{flat name: value}` of the flags of `add_config_arguments` given on the command
    line (a flag left out sets no attribute)."""
    names = [field.name for _, field in config_class.flat_fields()]
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def config_from_arguments(args: argparse.Namespace, config_class: type, **changes):
    """The `config_class` of the flags of `add_config_arguments` (by flat name, `changes` on
    top; the defaults for flags left out); a bad value or combination raises a ValueError
    that names it."""
    return config_class.from_flat(**{**given_values(args, config_class), **changes})
