"""Characters the vocabulary cannot write (emoji, names in another script), before and after
`translate_markup` restores them as protected spans (2026-11-28).

    git worktree add /tmp/before_unknown c38dfeb
    PYTHONPATH=/tmp/before_unknown python THIS RUN before.tsv
    python THIS RUN after.tsv
    (THIS: benchmarks/results/2026-11-28-unknown-characters.py; RUN: the default run's dir)

Inputs: the first 150 dev sentences, each in the shapes of `SHAPES` (an emoji or a name in
another script before, inside or after the sentence), through `translate_lines` (what
`keras-transformer-translate --markup` runs). Per shape: the inserted words that come back
verbatim, and BLEU of the outputs without them against the references (the rest of the
translation must not suffer). Outputs go to the given file, one per line.
"""

import re
import sys
from pathlib import Path

import sacrebleu

from keras_transformer.data.corpus import read_pairs

INSERTS = ("👍", "🙂", "✅", "Иван", "東京", "Ωμέγα")
SHAPES = {
    "emoji after the text": "{text} {emoji}",
    "emoji before the text": "{emoji} {text}",
    "emoji after the first word": "{first} {emoji} {rest}",
    "a name in another script after the first word": "{first} {name} {rest}",
    "a name in another script, in parentheses, after the text": "{text} ({name})",
}


def shaped(shape: str, text: str, i: int) -> tuple[str, str]:
    """One input of `shape` for sentence `text` (the i-th) and the word inserted."""
    emoji, name = INSERTS[i % 3], INSERTS[3 + i % 3]
    first, _, rest = text.partition(" ")
    word = name if "{name}" in shape else emoji
    return shape.format(text=text, emoji=emoji, name=name, first=first, rest=rest), word


def main(run: str, out_path: str) -> None:
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_translation import translate_lines

    pairs = list(read_pairs("sample_en_de", "dev"))[:150]
    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip
    lines = []
    print("| shape | inserted words | back verbatim | BLEU without them |")
    print("|---|---:|---:|---:|")
    for name, shape in SHAPES.items():
        inputs = [shaped(shape, s, i) for i, (s, _) in enumerate(pairs)]
        outputs = [t for t, _, _ in translate_lines(translator, [s for s, _ in inputs])[0]]
        back = sum(word in output for (_, word), output in zip(inputs, outputs))
        rest = [re.sub(r"\s+", " ", o.replace(f"({w})", "").replace(w, "")).strip()
                for (_, w), o in zip(inputs, outputs)]  # fmt: skip
        bleu = sacrebleu.corpus_bleu(rest, [[t for _, t in pairs]])
        print(f"| {name} | {len(inputs)} | {back} | {bleu.score:.2f} |")
        lines += outputs
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
