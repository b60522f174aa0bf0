"""No-break spaces (`&nbsp;`, U+00A0) where a page has spaces, through the paths that work on
words: `translate_markup` (tags, protected spans) and the plain path's word alignments,
before and after such spaces are read as spaces there (2026-11-28).

    git worktree add /tmp/before_spaces BEFORE
    PYTHONPATH=/tmp/before_spaces python THIS RUN before.tsv
    python THIS RUN after.tsv
    (THIS: benchmarks/results/2026-11-28-no-break-spaces.py; RUN: the default run's directory)

Inputs: the bundled tagged dev sets (460 + 36 pairs) for `translate_markup`, the first
`COUNT` test sentences for the word alignments (`translate_lines(markup=False)`, what
`keras-transformer-translate --alignments` runs). In each, the space after every word of at
most three letters ("the", "to", "OK": where pages put no-break spaces) becomes `&nbsp;` or
U+00A0, outside tags. SentencePiece reads a no-break space as a space, so the model's input
and translation do not change: a path that reads words as the model does gives the output
(and alignments) of the input with plain spaces. Per shape: the outputs equal to those of the
input with plain spaces, and their tag counts (well-formed with the source's tags).
"""

import gzip
import re
import sys
from pathlib import Path

from keras_transformer.data.corpus import read_pairs

COUNT = 300
SHORT = re.compile(r"(?<![\w&#;])(\w{1,3}) (?=\S)")


def spaced(text: str, space: str) -> str:
    """`text` with the space after each word of at most three letters as `space`, outside
    tags (and not after a character reference, which would change its word)."""
    from keras_transformer.data.markup import TAG

    parts = re.split(f"({TAG})", text)
    return "".join(p if i % 2 else SHORT.sub(lambda m: m[1] + space, p)
                   for i, p in enumerate(parts))  # fmt: skip


def tagged_sources() -> list:
    sample = Path(__file__).resolve().parents[2] / "keras_transformer/data/sample"
    with gzip.open(sample / "en_de.dev.tagged.tsv.gz", "rt", encoding="utf-8") as f:
        sources = [line.split("\t")[0] for line in f.read().splitlines()]
    hand = Path(__file__).resolve().parents[1] / "data/tagged_dev.tsv"
    lines = hand.read_text(encoding="utf-8").splitlines()
    return sources + [line.split("\t")[0] for line in lines if line and not line.startswith("#")]


def main(run: str, out_path: str) -> None:
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_translation import translate_lines

    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip
    test = [s for s, _ in read_pairs("sample_en_de", "test")][:COUNT]
    sets = {
        "translate_markup, tagged dev sets": (tagged_sources(), True),
        "word alignments, test sentences": (test, False),
    }
    lines = []
    print(
        "| inputs | shape | spaces changed | outputs as with plain spaces | alignments as with "
        "plain spaces |"
    )
    print("|---|---|---:|---:|---:|")
    for name, (sources, markup) in sets.items():
        clean = translate_lines(translator, sources, markup=markup)[0]
        for shape, space in (("`&nbsp;`", "&nbsp;"), ("U+00A0", "\u00a0")):
            if not markup and space.startswith("&"):
                continue  # plain text: a reference is its letters
            inputs = [spaced(s, space) for s in sources]
            changed = sum(a != b for a, b in zip(inputs, sources))
            outputs = translate_lines(translator, inputs, markup=markup)[0]
            same = sum(o[0] == c[0] for o, c in zip(outputs, clean))
            aligned = sum(o[1] == c[1] for o, c in zip(outputs, clean))
            print(
                f"| {name} | {shape} | {changed} inputs | {same} of {len(sources)} | "
                f"{aligned} of {len(sources)} |"
            )
            lines += [f"{o[0]}\t{o[1]}".replace("\n", " ") for o in outputs]
    Path(out_path).write_text("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
