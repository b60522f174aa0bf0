"""Whitespace between a tag and the text's first or last word, before and after `_layout`
keeps it on its side of the tag (2026-11-28).

    git worktree add /tmp/before_layout 48f4b70
    PYTHONPATH=/tmp/before_layout python THIS RUN before.tsv
    python THIS RUN after.tsv
    (THIS: benchmarks/results/2026-11-28-edge-whitespace.py; RUN: the default run's dir)

Inputs: the first 150 dev sentences, each in five page shapes (`SHAPES`), through
`translate_lines` (what `keras-transformer-translate --markup` runs). Per shape: the tags
whose neighbours (whitespace or not, before and after the tag) are the source's, BLEU of the
tag-stripped outputs against the references. Outputs go to the given file, one per line.
"""

import re
import sys
from pathlib import Path

import sacrebleu

from keras_transformer.data.corpus import read_pairs

SHAPES = {
    "image, then text": '<img src="i.png" alt=""> {}',
    "block with indented text": "<p>\n  {}\n</p>",
    "text, then image": '{} <img src="i.png">',
    "line break, then text": "<br> {}",
    "list item, then a rule": "<li>{}</li><hr>",
}


def neighbours(text: str) -> list[tuple[bool, bool]]:
    from keras_transformer.data.markup import TAG

    found = []
    for match in re.finditer(TAG, text):
        before = text[: match.start()]
        after = text[match.end() :]
        found.append((before[-1:].isspace(), after[:1].isspace()))
    return found


def main(run: str, out_path: str) -> None:
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_evaluation import strip_tags
    from keras_transformer.decoding.markup_translation import translate_lines

    pairs = list(read_pairs("sample_en_de", "dev"))[:150]
    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip
    lines = []
    print("| shape | tags | neighbours as the source's | BLEU stripped |")
    print("|---|---:|---:|---:|")
    for name, shape in SHAPES.items():
        sources = [shape.format(s) for s, _ in pairs]
        outputs = [t for t, _, _ in translate_lines(translator, sources)[0]]
        same = total = 0
        for source, output in zip(sources, outputs):
            want, got = neighbours(source), neighbours(output)
            total += len(want)
            same += sum(w == g for w, g in zip(want, got)) if len(want) == len(got) else 0
        bleu = sacrebleu.corpus_bleu([strip_tags(o) for o in outputs], [[t for _, t in pairs]])
        print(f"| {name} | {total} | {same} | {bleu.score:.2f} |", flush=True)
        lines += [o.replace("\n", "\\n") for o in outputs]
    Path(out_path).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
