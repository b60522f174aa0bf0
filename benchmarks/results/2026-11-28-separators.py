"""Words of separators only (menus, breadcrumbs: "Home | Help", "Tools › Options"), before
and after they are protected spans of `translate_markup` (2026-11-28).

    git worktree add /tmp/before_separators 8cc43f7
    PYTHONPATH=/tmp/before_separators python THIS RUN before.tsv
    python THIS RUN after.tsv
    (THIS: benchmarks/results/2026-11-28-separators.py; RUN: the default run's directory)

Inputs: the dev split's sentences of at most four words (titles, menu entries), paired in
order, each pair joined by every separator of `SEPARATORS` in two page shapes (`SHAPES`: two
links, or plain text), through `translate_lines` (what `keras-transformer-translate
--markup` runs); then the dev and test sentences that hold a separator word of their own.
Per separator and shape: the outputs holding the separator as a word as often as the source,
and BLEU of the outputs without tags and separators against the two references joined.
"""

import re
import sys
from pathlib import Path

import sacrebleu

from keras_transformer.data.corpus import read_pairs

SEPARATORS = ("|", "›", "•", ">", "/", "·", "→")
SHAPES = {
    "two links": '<a href="a">{}</a> {} <a href="b">{}</a>',
    "plain text": "{} {} {}",
}


def count(text: str, separator: str) -> int:
    from keras_transformer.data.markup import TAG

    plain = re.sub(TAG, " ", text.replace("&gt;", ">"))
    return plain.split().count(separator)


def main(run: str, out_path: str) -> None:
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_evaluation import strip_tags
    from keras_transformer.decoding.markup_translation import translate_lines

    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip
    short = [p for p in read_pairs("sample_en_de", "dev") if len(p[0].split()) <= 4]
    pairs = [(short[i], short[i + 1]) for i in range(0, len(short) - 1, 2)]
    lines = []
    print(f"{len(pairs)} pairs of short dev sentences\n")
    print("| shape | separator | outputs holding it as the source does | BLEU without it |")
    print("|---|---|---:|---:|")
    for name, shape in SHAPES.items():
        for separator in SEPARATORS:
            inputs = [shape.format(a[0], separator, b[0]) for a, b in pairs]
            references = [f"{a[1]} {b[1]}" for a, b in pairs]
            outputs = [t for t, _, _ in translate_lines(translator, inputs)[0]]
            kept = sum(count(o, separator) == 1 for o in outputs)
            rest = [" ".join(w for w in strip_tags(o).replace("&gt;", ">").split()
                             if w != separator) for o in outputs]  # fmt: skip
            bleu = sacrebleu.corpus_bleu(rest, [references]).score
            print(f"| {name} | `{separator}` | {kept} of {len(inputs)} | {bleu:.2f} |")
            lines += outputs
    own = [p for split in ("dev", "test") for p in read_pairs("sample_en_de", split)
           if any(count(p[0], s) for s in SEPARATORS)]  # fmt: skip
    outputs = [t for t, _, _ in translate_lines(translator, [s for s, _ in own])[0]]
    kept = sum(all(count(o, s) >= count(src, s) for s in SEPARATORS)
               for (src, _), o in zip(own, outputs))  # fmt: skip
    bleu = sacrebleu.corpus_bleu(outputs, [[t for _, t in own]]).score
    print(f"\nDev and test sentences with a separator word: {len(own)}, outputs holding every "
          f"one: {kept}, BLEU {bleu:.2f}")  # fmt: skip
    for (source, _), output in zip(own, outputs):
        print(f"  {source!r} -> {output!r}")
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines + outputs))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
