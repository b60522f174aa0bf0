"""XML elements named as HTML's void ones (`<link href=...>text</link>` of the help pages,
DocBook and DITA; `<embed>`, `<param>`, `<source>`, ...), before and after a void-named tag
with a closing tag of its name in the same input opens an element (2026-11-28).

    git worktree add /tmp/before_void BEFORE
    PYTHONPATH=/tmp/before_void python THIS RUN before.tsv
    python THIS RUN after.tsv
    (THIS: benchmarks/results/2026-11-28-void-names-paired.py; RUN: the default run's dir)

Inputs: the bundled tagged dev sets (`en_de.dev.tagged.tsv.gz`, 460 pairs, and the 36
hand-tagged pairs of benchmarks/data/tagged_dev.tsv), and the 460 again with every `<a>`
element renamed `<link>` (in source and reference: the help pages' own markup for links),
through `translate_lines` (`keras-transformer-translate --markup`). Per set: the inputs
warned about (translated as text), and `decoding.markup_evaluation.tag_scores`.
"""

import gzip
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pairs(path: Path) -> list:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line and not line.startswith("#")]
    return [tuple(line.split("\t")[:2]) for line in lines]


def as_links(text: str) -> str:
    return re.sub(r"<(/?)a\b", r"<\1link", text)


def main(run: str, out_path: str) -> None:
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_evaluation import tag_scores
    from keras_transformer.decoding.markup_translation import translate_lines

    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip
    bundled = pairs(ROOT / "keras_transformer/data/sample/en_de.dev.tagged.tsv.gz")
    sets = {
        "bundled (460)": bundled,
        "hand-tagged (36)": pairs(ROOT / "benchmarks/data/tagged_dev.tsv"),
        "bundled, `<a>` as `<link>` (460)": [(as_links(s), as_links(t)) for s, t in bundled],
    }
    lines = []
    print(
        "| set | void-named pairs | warned | well-formed | tags equal | chrF inside tags | "
        "BLEU stripped |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, rows in sets.items():
        sources, references = [s for s, _ in rows], [t for _, t in rows]
        outputs = translate_lines(translator, sources)[0]
        texts = [t for t, _, _ in outputs]
        warned = sum(bool(w) for _, _, w in outputs)
        paired = sum(bool(re.search(r"</(?:link|embed|param|source|img|input)\s*>", s))
                     for s in sources)  # fmt: skip
        s = tag_scores(sources, references, texts)
        print(
            f"| {name} | {paired} | {warned} | {s['well_formed']:.3f} | {s['tags_equal']:.3f} "
            f"| {s['chrf_inside_tags']:.2f} | {s['bleu_stripped']:.2f} |"
        )
        lines += texts
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
