"""Dates, ranges, versions and key pairs through `translate_markup`, before and after spans
joined inside a word and missing spans put in place of the model's strays (2026-11-28).

    git worktree add /tmp/before_joined 25f030d
    PYTHONPATH=/tmp/before_joined python THIS RUN before.txt
    python THIS RUN after.txt
    (THIS: benchmarks/results/2026-11-28-joined-spans.py; RUN: the default run's dir)

Inputs: the first 150 dev sentences, each with one value of `values` in parentheses before
its final punctuation (a different value for each sentence), through `translate_lines`
(what `keras-transformer-translate --markup` runs). Per shape: outputs holding the value
exactly once, at all, outputs holding a number the input does not (a digit run of the
output that no digit run of the input equals: the model's mangled copy left in place), and
BLEU of the outputs without the value against the references. Then the inputs with no
such value, which must not suffer: the tagged dev sets (460 + 36) and the test split, BLEU
of the stripped or plain outputs. Outputs go to the given file, one per line, in that order.
"""

import gzip
import re
import sys
from pathlib import Path

import sacrebleu

from keras_transformer.data.corpus import read_pairs


def values(i: int) -> dict:
    """Sentence i's value of each shape."""
    month, day, year, low = 1 + i % 12, 1 + (7 * i) % 28, 2010 + i % 15, 10 * (1 + i % 9)
    return {
        "date with slashes": f"{month:02d}/{day:02d}/{year}",
        "ISO date": f"{year}-{month:02d}-{day:02d}",
        "range": f"{low}–{low + 10 * (1 + i % 4)}",
        "range with thousands": f"{low},000–{low + 5},500",
        "two versions": f"{1 + i % 3}.{i % 10}.{i % 7}/{1 + i % 3}.{i % 10}.{1 + i % 7}",
        "two key combinations": ("Ctrl+C/Ctrl+V", "Ctrl+Z/Ctrl+Y", "Alt+F4/Alt+Tab")[i % 3],
        "price": f"${low},{250 + i % 7}",
        "percentage range": f"{low}–{low + 5}%",
        "negative temperature": f"-{1 + i % 20} °C",
        "change in percent": f"+{1 + i % 9}.{i % 10}%",
        "phone number": f"+{30 + i % 60} {100 + i} {1000000 + 7 * i}",
    }


def with_value(text: str, value: str) -> str:
    stem, end = (text[:-1], text[-1]) if text[-1] in ".!?" else (text, "")
    return f"{stem} ({value}){end}"


def tagged_pairs() -> list:
    sample = Path(__file__).resolve().parents[2] / "keras_transformer/data/sample"
    with gzip.open(sample / "en_de.dev.tagged.tsv.gz", "rt", encoding="utf-8") as f:
        pairs = [line.split("\t")[:2] for line in f.read().splitlines()]
    hand = Path(__file__).resolve().parents[1] / "data/tagged_dev.tsv"
    lines = hand.read_text(encoding="utf-8").splitlines()
    return pairs + [line.split("\t")[:2] for line in lines if line and not line.startswith("#")]


def main(run: str, out_path: str) -> None:
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_evaluation import tag_scores
    from keras_transformer.decoding.markup_translation import translate_lines

    pairs = list(read_pairs("sample_en_de", "dev"))[:150]
    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip

    def translate(texts):
        return [t for t, _, _ in translate_lines(translator, texts)[0]]

    lines = []
    print("| shape | inputs | value once | value at all | with a stray number | BLEU without it |")
    print("|---|---:|---:|---:|---:|---:|")
    for shape in values(0):
        inputs = [(with_value(s, values(i)[shape]), values(i)[shape])
                  for i, (s, _) in enumerate(pairs)]  # fmt: skip
        outputs = translate([s for s, _ in inputs])
        once = sum(o.count(v) == 1 for (_, v), o in zip(inputs, outputs))
        back = sum(v in o for (_, v), o in zip(inputs, outputs))
        stray = sum(any(d not in re.findall(r"\d+", s) for d in re.findall(r"\d+", o))
                    for (s, _), o in zip(inputs, outputs))  # fmt: skip
        rest = [re.sub(r"\s+", " ", o.replace(f"({v})", "").replace(v, "")).strip()
                for (_, v), o in zip(inputs, outputs)]  # fmt: skip
        bleu = sacrebleu.corpus_bleu(rest, [[t for _, t in pairs]])
        print(f"| {shape} | {len(inputs)} | {once} | {back} | {stray} | {bleu.score:.2f} |",
              flush=True)  # fmt: skip
        lines += outputs
    print("\n| inputs without such values | inputs | BLEU (of the text without tags) |")
    print("|---|---:|---:|")
    tagged, test = tagged_pairs(), list(read_pairs("sample_en_de", "test"))
    outputs = translate([s for s, _ in tagged])
    bleu = tag_scores([s for s, _ in tagged], [t for _, t in tagged], outputs)["bleu_stripped"]
    print(f"| tagged dev sets | {len(tagged)} | {bleu:.2f} |", flush=True)
    lines += outputs
    outputs = translate([s for s, _ in test])
    bleu = sacrebleu.corpus_bleu(outputs, [[t for _, t in test]]).score
    print(f"| test split | {len(test)} | {bleu:.2f} |", flush=True)
    lines += outputs
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
