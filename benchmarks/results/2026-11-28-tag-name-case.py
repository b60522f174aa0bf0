"""Tags whose opening and closing names differ in case (`<A HREF="...">...</a>`, `<SPAN
class="x">...</span>`: old HTML and its editors), before and after names pair without case,
as HTML reads them (2026-11-28).

    git worktree add /tmp/before_case BEFORE
    PYTHONPATH=/tmp/before_case python THIS RUN before.tsv
    python THIS RUN after.tsv
    (THIS: benchmarks/results/2026-11-28-tag-name-case.py; RUN: the default run's directory)

Inputs: the bundled tagged dev set (460 pairs) as it is, and with each opening tag's name in
upper case (source and reference), through `translate_lines` (`--markup`). Per set: the
inputs warned about (translated as text), `decoding.markup_evaluation.tag_scores`, and the
outputs equal, tag names aside, to those of the set as it is.
"""

import gzip
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def upper_openings(text: str) -> str:
    return re.sub(r"<([A-Za-z][\w:.-]*)", lambda m: "<" + m[1].upper(), text)


def main(run: str, out_path: str) -> None:
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_evaluation import tag_scores
    from keras_transformer.decoding.markup_translation import translate_lines

    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip
    with gzip.open(ROOT / "keras_transformer/data/sample/en_de.dev.tagged.tsv.gz", "rt") as f:
        rows = [line.split("\t")[:2] for line in f.read().splitlines() if line]
    sets = {"as it is": rows, "opening names in upper case": [
        (upper_openings(s), upper_openings(t)) for s, t in rows]}  # fmt: skip
    lines, first = [], None
    print(
        "| set | warned | well-formed | tags equal | chrF inside tags | BLEU stripped | "
        "outputs as for the set as it is |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, pairs in sets.items():
        sources, references = [s for s, _ in pairs], [t for _, t in pairs]
        outputs = translate_lines(translator, sources)[0]
        texts = [t for t, _, _ in outputs]
        first = first or texts
        same = sum(upper_openings(a) == upper_openings(b) for a, b in zip(texts, first))
        s = tag_scores(sources, references, texts)
        warned = sum(bool(w) for _, _, w in outputs)
        print(
            f"| {name} | {warned} | {s['well_formed']:.3f} | {s['tags_equal']:.3f} | "
            f"{s['chrf_inside_tags']:.2f} | {s['bleu_stripped']:.2f} | {same} of {len(texts)} |"
        )
        lines += texts
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
