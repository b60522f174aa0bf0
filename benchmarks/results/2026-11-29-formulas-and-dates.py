"""Spreadsheet formulas and dates through `translate_markup`, before and after a date written
in another order ("28.02.2001", "28/02/2001" for "2001-02-28"; "15.03.2012" for "03/15/2012")
and a formula's numbers in the target's style ("=RUNDEN(2,348;2)" for "=ROUND(2.348;2)")
count as the source's (2026-11-29).

    git worktree add /tmp/before_formulas BEFORE
    cp benchmarks/markup_inputs.py /tmp/before_formulas/benchmarks/  # if BEFORE lacks it
    PYTHONPATH=/tmp/before_formulas python THIS references RUN PAIR before_refs.txt
    PYTHONPATH=. python THIS references RUN PAIR after_refs.txt
    PYTHONPATH=/tmp/before_formulas python THIS outputs RUN PAIR before.txt
    PYTHONPATH=. python THIS outputs RUN PAIR after.txt
    PYTHONPATH=TREE python THIS cost LABEL   # restore_spans' time, alternated across trees
    (THIS: benchmarks/results/2026-11-29-formulas-and-dates.py; RUN: a run trained on PAIR,
    sample_en_de or sample_en_fr; BEFORE: the commit before the change)

`references`: `restore_spans` on the human translations of every training pair, aligned to
their sources by the run's alignment head, as if the model had written them (each change
damages a translation a person wrote): references changed, of them with a formula
(`FORMULA`) or a date (`DATE`) in the source, BLEU against the references.
`outputs`: through `translate_lines` (what `keras-transformer-translate --markup` runs), the
test and training pairs whose source holds a formula or a date (training pairs are seen in
training: what changes is `restore_spans`), then the pair's tagged dev sets and test split.
Outputs go to the given file, one per line, in order.
"""

import re
import sys
from pathlib import Path

import sacrebleu

from keras_transformer.data.corpus import read_pairs

FORMULA = r"=[A-Z][A-Z0-9.]*\("
DATE = r"\b\d{4}-\d\d-\d\d\b|\b\d{1,2}/\d{1,2}/\d{4}\b"


def with_formula_or_date(pair: str, split: str) -> list:
    return [(s, t) for s, t in read_pairs(pair, split) if re.search(f"{FORMULA}|{DATE}", s)]


def references(run: str, pair: str, out_path: str) -> None:
    from benchmarks.markup_inputs import restored_references

    pairs = list(read_pairs(pair, "train"))
    out = restored_references(run, pairs)
    changed = [k for k, ((_, t), o) in enumerate(zip(pairs, out)) if o != t]
    formula = [k for k in changed if re.search(FORMULA, pairs[k][0])]
    date = [k for k in changed if re.search(DATE, pairs[k][0])]
    bleu = sacrebleu.corpus_bleu(out, [[t for _, t in pairs]]).score
    print(f"{pair}: {len(pairs)} training pairs; references changed {len(changed)}, with a "
          f"formula {len(formula)}, with a date {len(date)}; BLEU of the results against the "
          f"references {bleu:.2f}")  # fmt: skip
    for k in formula[:6]:
        print(f"  {pairs[k][1][-100:]}\n    -> {out[k][-100:]}")
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in out))


def outputs(run: str, pair: str, out_path: str) -> None:
    from benchmarks.markup_inputs import markup_translator, tagged_pairs
    from keras_transformer.decoding.markup_evaluation import tag_scores

    translate = markup_translator(run)
    lines = []
    print(f"{pair}\n| inputs | n | BLEU |\n|---|---:|---:|")
    for split in ("test", "train"):
        pairs = with_formula_or_date(pair, split)
        got = translate([s for s, _ in pairs])
        bleu = sacrebleu.corpus_bleu(got, [[t for _, t in pairs]]).score
        print(f"| {split}, with a formula or a date | {len(pairs)} | {bleu:.2f} |", flush=True)
        lines += got
    tagged, test = tagged_pairs(pair), list(read_pairs(pair, "test"))
    got = translate([s for s, _ in tagged])
    bleu = tag_scores([s for s, _ in tagged], [t for _, t in tagged], got)["bleu_stripped"]
    print(f"| tagged dev sets (text without tags) | {len(tagged)} | {bleu:.2f} |")
    lines += got
    got = translate([s for s, _ in test])
    bleu = sacrebleu.corpus_bleu(got, [[t for _, t in test]]).score
    print(f"| test split | {len(test)} | {bleu:.2f} |", flush=True)
    lines += got
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines))


def cost(label: str) -> None:
    """`restore_spans`' time: the first 64 dev sentences, each with a formula and a date;
    their references with the formula's numbers in German style and the date in German
    order. Medians of 400 calls at batch 1 and 64."""
    from benchmarks.markup_inputs import restore_cost

    pairs = list(read_pairs("sample_en_de", "dev"))[:64]
    src = [f"{s[:-1]} (=ROUND({i}.25;2) on 2001-02-{10 + i % 18}){s[-1]}"
           for i, (s, _) in enumerate(pairs)]  # fmt: skip
    out = [f"{t[:-1]} (=RUNDEN({i},25;2) am {10 + i % 18}.02.2001){t[-1]}"
           for i, (_, t) in enumerate(pairs)]  # fmt: skip
    print(label, restore_cost(src, out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "cost":
        cost(sys.argv[2])
    else:
        {"outputs": outputs, "references": references}[sys.argv[1]](*sys.argv[2:5])
