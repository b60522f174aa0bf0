"""Elements with no text inside (`<a name="x"></a>`), glued to a word or not, before and
after they enclose nothing (2026-11-28).

    git worktree add /tmp/before_empty 31d0430
    PYTHONPATH=/tmp/before_empty python THIS shapes RUN before.tsv
    python THIS shapes RUN after.tsv
    python THIS score before_dev.tsv after_dev.tsv   # outputs of the edge-punctuation script

(THIS: benchmarks/results/2026-11-28-empty-elements.py, RUN: the default run's directory.)

shapes: the first 150 dev sentences in each of `SHAPES`, through `translate_lines` (what
`keras-transformer-translate --markup` runs): per shape, the elements that enclose text in
the output (none in the sources), those that stand where the source has them (before all
text, after all text, or between words) and enclose nothing, and BLEU of the tag-stripped
outputs. score: on the tagged dev sets' outputs (2026-11-28-edge-punctuation.py translate),
`tag_scores`, and the same two counts for every source element with no text inside, in
outputs whose tags equal the reference's, against the reference's place.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _edge_script():
    path = HERE / "2026-11-28-edge-punctuation.py"
    spec = importlib.util.spec_from_file_location("edge_punctuation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHAPES = {
    "anchor glued after the text": '{}<a id="e"></a>',
    "anchor glued after the first word": None,  # 'Word<a id="e"></a> rest of it.'
    "anchor glued before the text": '<a id="e"></a>{}',
    "empty span after a space": '{} <span class="x"></span>',
}


def shape_sources(name: str, sentences: list[str]) -> list[str]:
    if SHAPES[name] is not None:
        return [SHAPES[name].format(s) for s in sentences]
    return [re.sub(r"^(\S+)", r'\1<a id="e"></a>', s) for s in sentences]


def shapes(run: str, out_path: str) -> None:
    """The first 150 dev sentences in each of `SHAPES`, through `translate_lines`."""
    import sacrebleu

    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.data.corpus import read_pairs
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_evaluation import strip_tags
    from keras_transformer.decoding.markup_translation import translate_lines

    pairs = list(read_pairs("sample_en_de", "dev"))[:150]
    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip
    lines = []
    print("| shape | elements | enclosing text | placed as in the source | BLEU stripped |")
    print("|---|---:|---:|---:|---:|")
    for name in SHAPES:
        sources = shape_sources(name, [s for s, _ in pairs])
        outputs = [t for t, _, _ in translate_lines(translator, sources)[0]]
        enclosing = placed = 0
        for source, output in zip(sources, outputs):
            (_, where), (text, got) = empty_elements(source)[0], empty_elements(output)[0]
            enclosing += text
            placed += where == got and not text
        bleu = sacrebleu.corpus_bleu([strip_tags(o) for o in outputs], [[t for _, t in pairs]])
        print(f"| {name} | {len(sources)} | {enclosing} | {placed} | {bleu.score:.2f} |")
        lines += outputs
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t in lines))


def empty_elements(text: str) -> list[tuple[bool, str]]:
    """For each element of `text` whose opening tag a closing tag of the same name follows
    (whitespace between at most) in the source sense: (it encloses text, where it stands:
    "start", "end" or "middle" of the tag-stripped text)."""
    from keras_transformer.data.markup import TAG

    parts = re.split(f"({TAG})", text)
    plain = [p if i % 2 == 0 else "" for i, p in enumerate(parts)]
    found = []
    for i, part in enumerate(parts):
        name = re.match(r"<([A-Za-z_][\w:.-]*)", part) if i % 2 else None
        if not name or part.endswith("/>"):
            continue
        depth, j = 0, i + 2
        while j < len(parts):  # the partner: the first closing tag of this name at depth 0
            if j % 2 and re.match(rf"</{name.group(1)}\s*>", parts[j]) and depth == 0:
                break
            if j % 2 and re.match(rf"<{name.group(1)}[\s>]", parts[j]):
                depth += 1
            elif j % 2 and re.match(rf"</{name.group(1)}\s*>", parts[j]):
                depth -= 1
            j += 2
        inside = "".join(plain[i + 1 : j]).strip()
        before, after = "".join(plain[:i]).strip(), "".join(plain[j:]).strip()
        place = "start" if not before else "end" if not after else "middle"
        found.append((bool(inside), place))
    return found


def score(*paths: str) -> None:
    from keras_transformer.data.markup import TAG
    from keras_transformer.decoding.markup_evaluation import tag_scores

    sources, references = zip(*_edge_script().pairs())
    print("| file | well-formed | tags equal | chrF inside tags | BLEU stripped | empty elements "
          "compared | enclosing text | placed as the reference |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        outputs = Path(path).read_text().splitlines()
        s = tag_scores(sources, references, outputs)
        compared = enclosing = placed = 0
        for source, reference, output in zip(sources, references, outputs):
            if re.findall(TAG, output) != re.findall(TAG, reference):
                continue
            empty = [not text for text, _ in empty_elements(source)]
            for keep, (_, where), (text, got) in zip(
                empty, empty_elements(reference), empty_elements(output)
            ):
                if keep:
                    compared += 1
                    enclosing += text
                    placed += where == got
        print(
            f"| {path} | {s['well_formed']:.3f} | {s['tags_equal']:.3f} | "
            f"{s['chrf_inside_tags']:.2f} | {s['bleu_stripped']:.2f} | {compared} | "
            f"{enclosing} | {placed} |"
        )


if __name__ == "__main__":
    if sys.argv[1] == "shapes":
        shapes(sys.argv[2], sys.argv[3])
    else:
        score(*sys.argv[2:])
