"""`restore_spans` on human translations: how many references of the training split it would
change (each change damages a translation a person wrote), before and after a number in the
target language's style counts as the source's (2026-11-28).

    git worktree add /tmp/before_locale 8502306
    cp benchmarks/markup_inputs.py /tmp/before_locale/benchmarks/  # (8502306 lacks it)
    PYTHONPATH=/tmp/before_locale python THIS RUN PAIR before.txt
    PYTHONPATH=. python THIS RUN PAIR after.txt
    (THIS: benchmarks/results/2026-11-28-localized-numbers-references.py; RUN: a run trained
    on PAIR, sample_en_de or sample_en_fr: its alignment head aligns each pair)

Pairs: every training pair of PAIR whose source holds a digit. Each reference is aligned to
its source (`align_tensors`, the run's alignment choice, as `translate_markup` aligns a
translation) and given to `restore_spans` as if the model had written it. Printed: pairs,
references changed, of them with a number of `NUMBER` in the source, BLEU of the changed
references against the references. The results, one per line, go to the given file.
"""

import re
import sys
from pathlib import Path

import sacrebleu

from keras_transformer.data.corpus import read_pairs

NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+"  # English-style thousands or decimals


def main(run: str, pair: str, out_path: str) -> None:
    from benchmarks.markup_inputs import restored_references

    pairs = [(s, t) for s, t in read_pairs(pair, "train") if re.search(r"\d", s)]
    out = restored_references(run, pairs)
    changed = [k for k, ((_, t), o) in enumerate(zip(pairs, out)) if o != t]
    numbered = [k for k in changed if re.search(NUMBER, pairs[k][0])]
    bleu = sacrebleu.corpus_bleu(out, [[t for _, t in pairs]]).score
    print(f"{pair}: {len(pairs)} pairs with a digit; references changed {len(changed)}, "
          f"{len(numbered)} of them with a thousands or decimal number; BLEU of the results "
          f"against the references {bleu:.2f}")  # fmt: skip
    for k in numbered[:8]:
        print(f"  {pairs[k][1][-90:]}\n    -> {out[k][-90:]}")
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in out))


if __name__ == "__main__":
    main(*sys.argv[1:4])
