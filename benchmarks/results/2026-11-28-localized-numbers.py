"""Numbers with separators through `translate_markup`, before and after a number written in
the target language's style counts as the source's (2026-11-28).

    git worktree add /tmp/before_locale 8502306
    cp benchmarks/markup_inputs.py /tmp/before_locale/benchmarks/  # (8502306 lacks it)
    PYTHONPATH=/tmp/before_locale python THIS RUN PAIR before.txt
    PYTHONPATH=. python THIS RUN PAIR after.txt
    (THIS: benchmarks/results/2026-11-28-localized-numbers.py; RUN: a run trained on PAIR,
    sample_en_de or sample_en_fr)
    PYTHONPATH=TREE python THIS cost LABEL   # restore_spans' time, alternated across trees

Inputs: the first 150 dev sentences of PAIR, each with one value of `values` in parentheses
before its final punctuation (a different value for each sentence), through `translate_lines`
(what `keras-transformer-translate --markup` runs). Per shape: outputs holding the number in
some style (`written`: English, German, French, Swiss), in the target language's style, in
the source's (English) style, outputs holding a digit run the input does not (the model's
mangled copy left in place), and BLEU of the outputs without the number against the
references. Then the inputs without such values: the pair's tagged dev sets and test split,
BLEU of the stripped or plain outputs. Outputs go to the given file, one per line, in order.
"""

import re
import sys
from pathlib import Path

import sacrebleu

from benchmarks.markup_inputs import with_value
from keras_transformer.data.corpus import read_pairs

STYLES = {"en": (",", "."), "de": (".", ","), "fr": (" ", ","), "ch": ("'", ".")}


def values(i: int) -> dict:
    """Sentence i's value of each shape, in English style."""
    high, group, cents = 10 + i % 90, (37 * i) % 1000, (7 * i) % 100
    return {
        "thousands": f"{high},{group:03d}",
        "millions": f"{1 + i % 9},{group:03d},{(53 * i) % 1000:03d}",
        "decimal": f"{1 + i % 20}.{cents:02d}",
        "thousands and decimals": f"{high},{group:03d}.{cents:02d}",
        "price": f"${high},{group:03d}",
        "percentage": f"{1 + i % 20}.{1 + i % 9}%",
    }


def number(value: str) -> str:
    return re.search(r"\d[\d,.]*\d|\d", value).group()


def written(english: str, style: str) -> str:
    """An English-style number in `style`: "12,500.75" -> "12.500,75" (de), "12 500,75" (fr)."""
    group, point = STYLES[style]
    return english.replace(",", "\0").replace(".", point).replace("\0", group)


def holds(output: str, form: str) -> bool:
    return re.search(rf"(?<![\d.,']){re.escape(form)}(?![\d]|[.,']\d)", output) is not None


def main(run: str, pair: str, out_path: str) -> None:
    from benchmarks.markup_inputs import markup_translator, tagged_pairs
    from keras_transformer.decoding.markup_evaluation import tag_scores

    target = {"sample_en_de": "de", "sample_en_fr": "fr"}[pair]
    pairs = list(read_pairs(pair, "dev"))[:150]
    translate = markup_translator(run)

    lines = []
    print(f"{pair}, target style {target}")
    print("| shape | inputs | number in some style | in the target's | in English style | "
          "with a stray number | BLEU without it |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for shape in values(0):
        inputs = [(with_value(s, values(i)[shape]), number(values(i)[shape]))
                  for i, (s, _) in enumerate(pairs)]  # fmt: skip
        outputs = translate([s for s, _ in inputs])
        some = sum(any(holds(o, written(v, st)) for st in STYLES)
                   for (_, v), o in zip(inputs, outputs))  # fmt: skip
        native = sum(holds(o, written(v, target)) for (_, v), o in zip(inputs, outputs))
        english = sum(holds(o, v) for (_, v), o in zip(inputs, outputs))
        stray = sum(any(d not in re.findall(r"\d+", s) for d in re.findall(r"\d+", o))
                    for (s, _), o in zip(inputs, outputs))  # fmt: skip
        rest = []
        for (_, v), o in zip(inputs, outputs):
            for st in STYLES:
                o = o.replace(written(v, st), "")
            rest.append(re.sub(r"\s+", " ", re.sub(r"\(\s*[$%]?\s*[$%]?\s*\)", "", o)).strip())
        bleu = sacrebleu.corpus_bleu(rest, [[t for _, t in pairs]])
        print(f"| {shape} | {len(inputs)} | {some} | {native} | {english} | {stray} | "
              f"{bleu.score:.2f} |", flush=True)  # fmt: skip
        lines += outputs
    print("\n| inputs without such values | inputs | BLEU (of the text without tags) |")
    print("|---|---:|---:|")
    tagged, test = tagged_pairs(pair), list(read_pairs(pair, "test"))
    outputs = translate([s for s, _ in tagged])
    bleu = tag_scores([s for s, _ in tagged], [t for _, t in tagged], outputs)["bleu_stripped"]
    print(f"| tagged dev sets | {len(tagged)} | {bleu:.2f} |", flush=True)
    lines += outputs
    outputs = translate([s for s, _ in test])
    bleu = sacrebleu.corpus_bleu(outputs, [[t for _, t in test]]).score
    print(f"| test split | {len(test)} | {bleu:.2f} |", flush=True)
    lines += outputs
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines))


def cost(label: str) -> None:
    """`restore_spans` in a `tf.function`: the first 64 dev sentences, each with a number and
    a date; their references with the number in French style and the date mangled. Medians
    of 400 calls at batch 1 and 64."""
    from benchmarks.markup_inputs import restore_cost

    pairs = list(read_pairs("sample_en_de", "dev"))[:64]
    src = [f"{s[:-1]} (12,{100 + i}.5 and 03/15/2012){s[-1]}" for i, (s, _) in enumerate(pairs)]
    out = [f"{t[:-1]} (12 {100 + i},5 und 0/3/15,2012){t[-1]}" for i, (_, t) in enumerate(pairs)]
    print(label, restore_cost(src, out), flush=True)


if __name__ == "__main__":
    cost(sys.argv[2]) if sys.argv[1] == "cost" else main(*sys.argv[1:4])
