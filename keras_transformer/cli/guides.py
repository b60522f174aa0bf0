"""The translate command's guides (`keras_transformer.decoding.guided`): flags, per-line
values from extra TSV columns, the glossary file, and the decoder they select.

    keras-transformer-translate --model-dir DIR --prefix "Klicken Sie auf die Sch" < in.en
    keras-transformer-translate --model-dir DIR --constraints Tabellendokument --avoid Haus
    keras-transformer-translate --model-dir DIR --glossary terms.tsv --input in.en
    keras-transformer-translate --model-dir DIR --alternatives 3 --prefix "Das "
    keras-transformer-translate --model-dir DIR --guide-columns < lines.tsv

With --guide-columns each line is `source<TAB>prefix<TAB>constraint<TAB>constraint...`: the
second column is that line's prefix, every further column one of its constraints (added to
--constraints). --alternatives K prints K lines per source, `index<TAB>rank<TAB>score<TAB>
translation`, as --n-best does. A line whose constraints could not all be met is still
translated, and named on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from keras_transformer.cli.common import read_lines

GUIDE_FLAGS = ("prefix", "constraints", "avoid", "glossary", "alternatives", "guide_columns")


def add_guide_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("guides (prefix, alternatives, terminology)")
    group.add_argument("--prefix", default=None, help="every translation starts with this text")
    group.add_argument(
        "--alternatives",
        type=int,
        default=None,
        help="K continuations of the prefix that differ in their first piece",
    )
    group.add_argument(
        "--constraints",
        action="append",
        default=[],
        help="a target phrase that must appear (repeat the flag for more)",
    )
    group.add_argument(
        "--avoid",
        action="append",
        default=[],
        help="a target phrase that must not appear (repeatable)",
    )
    group.add_argument(
        "--glossary",
        default=None,
        help="FILE.tsv of source<TAB>target lines: the target is required in "
        "every sentence whose source holds the source term",
    )
    group.add_argument(
        "--guide-columns",
        action="store_true",
        help="input lines are source<TAB>prefix<TAB>constraint...",
    )


def has_guides(args: argparse.Namespace) -> bool:
    return bool(
        args.prefix is not None
        or args.alternatives
        or args.constraints
        or args.avoid
        or args.glossary
        or args.guide_columns
    )


def read_glossary(path: str) -> str:
    """A glossary file's `source<TAB>target` lines joined by newlines; a line that is not two
    non-empty fields is a ValueError naming its number and text."""
    lines = read_lines(path)
    kept = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not all(field.strip() for field in fields):
            raise ValueError(
                f"{path} line {number} is not source<TAB>target. Received: line={line!r}"
            )
        kept.append(line)
    return "\n".join(kept)


def check_guides(args: argparse.Namespace) -> None:
    if args.alternatives is not None and not 1 <= args.alternatives <= 8:
        raise ValueError(f"--alternatives must be in [1, 8]. Received: {args.alternatives}")
    if args.alternatives and (args.n_best is not None or args.sampling):
        raise ValueError("--alternatives replaces --n-best and --sampling: drop one of them.")
    for phrase in args.constraints + args.avoid:
        if "\t" in phrase or not phrase.strip():
            raise ValueError(f"a phrase must be non-empty text without tabs. Received: {phrase!r}")


def guide_rows(lines: list[str], args: argparse.Namespace, glossary: str) -> list[list[str]]:
    """Per line: `[source, prefix, constraints, avoid, glossary]`."""
    rows = []
    for line in lines:
        columns = line.split("\t") if args.guide_columns else [line]
        prefix = columns[1] if len(columns) > 1 else (args.prefix or "")
        wanted = "\t".join(args.constraints + [c for c in columns[2:] if c.strip()])
        rows.append([columns[0], prefix, wanted, "\t".join(args.avoid), glossary])
    return rows


def guided_decoder(translator, args: argparse.Namespace) -> Callable:
    """`decode(lines, progress) -> (outputs, scores)` through one traced guided function, in
    batches of `args.batch_size` lines."""
    import tensorflow as tf

    from keras_transformer.decoding.guided import guided_function

    check_guides(args)
    glossary = read_glossary(args.glossary) if args.glossary else ""
    function = guided_function(translator, alternatives=args.alternatives or 0)

    def decode(lines, progress):
        rows = guide_rows(lines, args, glossary)
        outputs, scores = [], []
        for start in range(0, len(rows), args.batch_size):
            batch = rows[start : start + args.batch_size]
            out = function(*[tf.constant([row[i] for row in batch]) for i in range(5)])
            texts = out["translations"].numpy().tolist()
            outputs += [
                [t.decode() for t in r] if isinstance(r, list) else r.decode() for r in texts
            ]
            scores += out["scores"].numpy().tolist()
            met = out["constraints_met"].numpy()
            for index, ok in enumerate(met if met.ndim == 1 else met[:, 0], start=start):
                if not ok:
                    print(f"warning: line {index + 1}: constraints not all met", file=sys.stderr)
        return outputs, scores

    return decode
