"""Invisible characters that web pages, CMSs and files send inside and around words: soft
hyphens (`&shy;`), zero-width spaces (`&#8203;`, break hints), word joiners, a byte-order
mark and bidi marks, before and after they are removed from the model's input (2026-11-28).

    git worktree add /tmp/before_invisible 5231211
    PYTHONPATH=/tmp/before_invisible python THIS RUN before.tsv
    python THIS RUN after.tsv
    (THIS: benchmarks/results/2026-11-28-invisible-characters.py; RUN: the default run's
    directory)

Inputs: the first `COUNT` test sentences, each in every shape of `SHAPES` (the character put
in the middle of every word of at least `LONG` letters, or around the sentence), through
`Translator.translate` (`serving_default`'s path) and `translate_lines` (`translate_markup`'s,
what `keras-transformer-translate --markup` runs). Per shape and path: BLEU and chrF against
the references, the outputs equal to the clean sentence's output on the same path, and the
outputs holding an invisible character (a word copied untranslated).
"""

import re
import sys
from pathlib import Path

import sacrebleu

from keras_transformer.data.corpus import read_pairs

COUNT, LONG = 300, 7
INVISIBLE = "\u00ad\u200b\u2060\ufeff\u200e\u200f\u200d"


def inside(char: str):
    """The shape that puts `char` in the middle of every long word."""

    def put(sentence: str) -> str:
        return re.sub(rf"\b(\w{{{LONG},}})\b",
                      lambda m: m[1][: len(m[1]) // 2] + char + m[1][len(m[1]) // 2:],
                      sentence)  # fmt: skip

    return put


SHAPES = {
    "clean": lambda s: s,
    "soft hyphen (U+00AD) in long words": inside("\u00ad"),
    "zero-width space (U+200B) in long words": inside("\u200b"),
    "word joiner (U+2060) in long words": inside("\u2060"),
    "byte-order mark first, LRM and RLM around the last word": lambda s: (
        "\ufeff" + re.sub(r"(\S+)(\s*)$", "\u200e\\1\u200f\\2", s)
    ),
}


def main(run: str, out_path: str) -> None:
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_translation import translate_lines

    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip
    pairs = list(read_pairs("sample_en_de", "test"))[:COUNT]
    references = [t for _, t in pairs]
    paths = {
        "serving_default": lambda texts: translator.translate(texts)[0],
        "translate_markup": lambda texts: [t for t, _, _ in translate_lines(translator, texts)[0]],
    }
    lines, clean = [], {}
    long_words = sum(len(re.findall(rf"\b\w{{{LONG},}}\b", s)) for s, _ in pairs)
    print(f"{COUNT} test sentences; {long_words} words of at least {LONG} letters\n")
    print(
        "| shape | path | BLEU | chrF | outputs as for the clean input | outputs holding an "
        "invisible character |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for shape, make in SHAPES.items():
        inputs = [make(s) for s, _ in pairs]
        for path, translate in paths.items():
            outputs = translate(inputs)
            clean.setdefault(path, outputs)
            same = sum(a == b for a, b in zip(outputs, clean[path]))
            held = sum(any(c in o for c in INVISIBLE) for o in outputs)
            bleu = sacrebleu.corpus_bleu(outputs, [references]).score
            chrf = sacrebleu.corpus_chrf(outputs, [references]).score
            print(f"| {shape} | {path} | {bleu:.2f} | {chrf:.2f} | {same} | {held} |")
            lines += outputs
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
