"""Times of day with am or pm through `translate_markup`, before and after they hold no
protected span (2026-11-28).

    git worktree add /tmp/before_clock 47deb4a
    cp benchmarks/markup_inputs.py /tmp/before_clock/benchmarks/  # (47deb4a lacks it)
    PYTHONPATH=/tmp/before_clock python THIS RUN PAIR before.txt
    PYTHONPATH=. python THIS RUN PAIR after.txt
    (THIS: benchmarks/results/2026-11-28-clock-times.py; RUN: a run trained on PAIR,
    sample_en_de or sample_en_fr)

Inputs: the first 150 dev sentences of PAIR, each with one time of `values` in parentheses
before its final punctuation (a different hour for each sentence), through `translate_lines`
(what `keras-transformer-translate --markup` runs). Per shape: outputs holding the time's
afternoon hour in 24-hour form as a number (`15` for 3 pm), holding the source's hour with
am or pm as the source writes it, and BLEU of the outputs without the time against the
references. Then the pair's test split, which must not suffer. Outputs go to the given file.
"""

import re
import sys
from pathlib import Path

import sacrebleu

from benchmarks.markup_inputs import with_value
from keras_transformer.data.corpus import read_pairs


def values(i: int) -> dict:
    """Sentence i's time of each shape, and its afternoon hour in 24-hour form."""
    hour, start = 1 + i % 11, 7 + i % 4
    return {
        "3 pm": (f"{hour} pm", 12 + hour),
        "3pm": (f"{hour}pm", 12 + hour),
        "10am-5pm": (f"{start}am-{hour % 6 + 2}pm", 12 + hour % 6 + 2),
        "3:30 p.m.": (f"{hour}:30 p.m.", 12 + hour),
    }


def main(run: str, pair: str, out_path: str) -> None:
    from benchmarks.markup_inputs import markup_translator

    pairs = list(read_pairs(pair, "dev"))[:150]
    translate = markup_translator(run)

    lines = []
    print(f"{pair}")
    print("| shape | inputs | 24-hour hour | the source's time | BLEU without it |")
    print("|---|---:|---:|---:|---:|")
    for shape in values(0):
        cases = [(with_value(s, values(i)[shape][0]),) + values(i)[shape]
                 for i, (s, _) in enumerate(pairs)]  # fmt: skip
        outputs = translate([c[0] for c in cases])
        hours = sum(str(h) in re.findall(r"\d+", o) for (_, _, h), o in zip(cases, outputs))
        kept = sum(v in o for (_, v, _), o in zip(cases, outputs))
        rest = [re.sub(r"\s+", " ", re.sub(r"\([^()]*\d[^()]*\)", "", o)).strip()
                for o in outputs]  # fmt: skip
        bleu = sacrebleu.corpus_bleu(rest, [[t for _, t in pairs]])
        print(f"| {shape} | {len(cases)} | {hours} | {kept} | {bleu.score:.2f} |", flush=True)
        lines += outputs
    test = list(read_pairs(pair, "test"))
    outputs = translate([s for s, _ in test])
    bleu = sacrebleu.corpus_bleu(outputs, [[t for _, t in test]]).score
    print(f"\n| test split | {len(test)} | BLEU {bleu:.2f} |", flush=True)
    lines += outputs
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines))


if __name__ == "__main__":
    main(*sys.argv[1:4])
