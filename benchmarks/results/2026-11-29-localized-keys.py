"""Key combinations through `translate_markup`, before and after a combination the model wrote
with the target language's key names ("Strg+Umschalt+F1", "Ctrl+Maj+Entrée" for
"Ctrl+Shift+F1", "Ctrl+Shift+Enter") counts as the source's (2026-11-29).

    git worktree add /tmp/before_keys BEFORE
    cp benchmarks/markup_inputs.py /tmp/before_keys/benchmarks/  # (BEFORE lacks it)
    PYTHONPATH=/tmp/before_keys python THIS outputs RUN PAIR before.txt
    PYTHONPATH=. python THIS outputs RUN PAIR after.txt
    PYTHONPATH=/tmp/before_keys python THIS references RUN PAIR before_refs.txt
    PYTHONPATH=. python THIS references RUN PAIR after_refs.txt
    PYTHONPATH=TREE python THIS cost LABEL   # restore_spans' time, alternated across trees
    (THIS: benchmarks/results/2026-11-29-localized-keys.py; RUN: a run trained on PAIR,
    sample_en_de or sample_en_fr; BEFORE: the commit before the change)

`outputs`: through `translate_lines` (what `keras-transformer-translate --markup` runs), the
test sentences whose source holds a key combination (`COMBINATION`: English names), the
training pairs that do (seen in training: the model knows them, `restore_spans` is what
changes), then the pair's tagged dev sets and whole test split. Per set: BLEU, outputs with
an English key name the target language names otherwise (`ENGLISH`, "Ctrl" in German,
"Shift" in both), outputs with both an English and a localized combination (one written
twice), outputs with a localized one.
`references`: `restore_spans` on the human translations of those training pairs, aligned to
their sources by the run's alignment head, as if the model had written them (each change
damages a translation a person wrote): references changed and BLEU against the references.
Outputs go to the given file, one per line, in order.
"""

import re
import sys
from pathlib import Path

import sacrebleu

from keras_transformer.data.corpus import read_pairs

MODIFIERS = r"Ctrl|Control|Shift|Alt|AltGr|Option|Opt|Cmd|Command|Meta|Super|Win|Fn"
COMBINATION = rf"(?:(?:{MODIFIERS})\+)+\w+"
# English names that the references of each pair write otherwise (the training references:
# "Strg+" 253 times and "Ctrl+" never in German; "Maj+" for "Shift+" in French).
ENGLISH = {
    "sample_en_de": r"(?:Ctrl|Shift|Enter|Delete|Del|Insert|Home|End|Backspace|Space|Page|Up|Down)",
    "sample_en_fr": r"(?:Shift|Enter|Delete|Del|Insert|Home|End|Backspace|Space|Up|Down|Esc)",
}
LOCAL = {
    "sample_en_de": r"(?:Strg|Umschalt|Eingabetaste|Eingabe|Entf|Einfg|Pos1|Ende|Tabulator|"
    r"Rückschritt|Leertaste|Bild|Pfeil)",
    "sample_en_fr": r"(?:Maj|Entrée|Suppr|Inser|Origine|Fin|Échap|Espace|Flèche|Retour)",
}


def english(pair: str, text: str) -> bool:
    name = ENGLISH[pair]
    return re.search(rf"(?<!\w)(?:{name})\+|\+(?:{name})\b", text) is not None


def local(pair: str, text: str) -> bool:
    name = LOCAL[pair]
    return re.search(rf"{name}\+|\+{name}(?!\w)", text) is not None


def with_keys(pair: str, split: str) -> list:
    return [(s, t) for s, t in read_pairs(pair, split) if re.search(COMBINATION, s)]


def outputs(run: str, pair: str, out_path: str) -> None:
    from benchmarks.markup_inputs import markup_translator, tagged_pairs
    from keras_transformer.decoding.markup_evaluation import tag_scores

    translate = markup_translator(run)
    lines = []
    print(f"{pair}\n| inputs | n | BLEU | English name | both forms | localized |\n"
          "|---|---:|---:|---:|---:|---:|")  # fmt: skip
    sets = [
        (f"{split}, with a key combination", with_keys(pair, split)) for split in ("test", "train")
    ]
    for label, pairs in sets:
        got = translate([s for s, _ in pairs])
        bleu = sacrebleu.corpus_bleu(got, [[t for _, t in pairs]]).score
        eng = sum(english(pair, o) for o in got)
        both = sum(english(pair, o) and local(pair, o) for o in got)
        loc = sum(local(pair, o) for o in got)
        print(f"| {label} | {len(pairs)} | {bleu:.2f} | {eng} | {both} | {loc} |", flush=True)
        lines += got
    tagged, test = tagged_pairs(pair), list(read_pairs(pair, "test"))
    got = translate([s for s, _ in tagged])
    bleu = tag_scores([s for s, _ in tagged], [t for _, t in tagged], got)["bleu_stripped"]
    print(f"| tagged dev sets (text without tags) | {len(tagged)} | {bleu:.2f} | | | |")
    lines += got
    got = translate([s for s, _ in test])
    bleu = sacrebleu.corpus_bleu(got, [[t for _, t in test]]).score
    print(f"| test split | {len(test)} | {bleu:.2f} | | | |", flush=True)
    lines += got
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines))


def references(run: str, pair: str, out_path: str) -> None:
    from benchmarks.markup_inputs import restored_references

    pairs = with_keys(pair, "train")
    out = restored_references(run, pairs)
    changed = [k for k, ((_, t), o) in enumerate(zip(pairs, out)) if o != t]
    bleu = sacrebleu.corpus_bleu(out, [[t for _, t in pairs]]).score
    print(f"{pair}: {len(pairs)} training pairs with a key combination; references changed "
          f"{len(changed)}; BLEU of the results against the references {bleu:.2f}")  # fmt: skip
    for k in changed[:6]:
        print(f"  {pairs[k][1][-100:]}\n    -> {out[k][-100:]}")
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in out))


def cost(label: str) -> None:
    """`restore_spans`' time: the first 64 dev sentences, each with a key combination and a
    number; their references with the keys in German and reordered and the number in French
    style. Medians of 400 calls at batch 1 and 64."""
    from benchmarks.markup_inputs import restore_cost

    pairs = list(read_pairs("sample_en_de", "dev"))[:64]
    src = [f"{s[:-1]} (Shift+Ctrl+F{1 + i % 12}, 12,{100 + i}.5){s[-1]}"
           for i, (s, _) in enumerate(pairs)]  # fmt: skip
    out = [f"{t[:-1]} (Strg+Umschalt+F{1 + i % 12}, 12 {100 + i},5){t[-1]}"
           for i, (_, t) in enumerate(pairs)]  # fmt: skip
    print(label, restore_cost(src, out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "cost":
        cost(sys.argv[2])
    else:
        {"outputs": outputs, "references": references}[sys.argv[1]](*sys.argv[2:5])
