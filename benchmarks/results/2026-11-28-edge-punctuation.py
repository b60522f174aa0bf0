"""Punctuation at elements' edges (`data/edges.py`), before and after, on the tagged dev sets.

    git worktree add /tmp/before_edges 5aa0678
    PYTHONPATH=/tmp/before_edges python THIS translate RUN before.tsv
    python THIS translate RUN after.tsv
    python THIS score before.tsv after.tsv
    PYTHONPATH=/tmp/before_edges python THIS time before.tsv; python THIS time before.tsv

(THIS: benchmarks/results/2026-11-28-edge-punctuation.py, RUN: the default run's directory.)

translate: `translate_lines` (what `keras-transformer-translate --markup` runs) on the
bundled `en_de.dev.tagged.tsv.gz` (460 pairs) and benchmarks/data/tagged_dev.tsv (36), one
output per line, with the seconds of a second pass (the first traces). score: for both
files, `tag_scores` against the tagged references, and for every closing tag of an output
whose tags equal the reference's: whether a punctuation character (Unicode P) stands right
before it (inside the element) or right after it, against the reference's same tag.
time: `parse_markup` and `insert_tags` alone (traced, batches of 32, the outputs' words all
aligned to the first source word), medians of 15 passes over the 496 inputs.
"""

from __future__ import annotations

import re
import sys
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "tagged_dev.tsv"


def pairs() -> list[tuple[str, str]]:
    from keras_transformer.data.corpus import SAMPLE_DIR
    from keras_transformer.data.corpus_files import open_binary

    out = []
    for path in (Path(SAMPLE_DIR) / "en_de.dev.tagged.tsv.gz", DATA):
        with open_binary(path) as file:
            lines = file.read().decode("utf-8").splitlines()
        out += [tuple(line.split("\t")[:2]) for line in lines
                if line and not line.startswith("#")]  # fmt: skip
    return out


def translate(run: str, out_path: str) -> None:
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_translation import translate_lines

    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip
    sources = [s for s, _ in pairs()]
    times = []
    for _ in range(2):
        start = time.perf_counter()
        outputs, _ = translate_lines(translator, sources)
        times.append(time.perf_counter() - start)
    Path(out_path).write_text("".join(t.replace("\n", " ") + "\n" for t, _, _ in outputs))
    print(f"{len(sources)} inputs, second pass {times[1]:.1f} s (first {times[0]:.1f} s)")


def _punct(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def edges(text: str) -> list[tuple[bool, bool]]:
    """For each closing tag of `text`: (punctuation right before it, right after it), tags
    around it skipped."""
    from keras_transformer.data.markup import TAG

    parts = re.split(f"({TAG})", text)
    plain = [p if i % 2 == 0 else "" for i, p in enumerate(parts)]
    found = []
    for i, part in enumerate(parts):
        if i % 2 and part.startswith("</"):
            before, after = "".join(plain[:i]), "".join(plain[i + 1 :])
            found.append((bool(before) and _punct(before[-1]), bool(after) and _punct(after[0])))
    return found


def score(*paths: str) -> None:
    from keras_transformer.data.markup import TAG
    from keras_transformer.decoding.markup_evaluation import tag_scores

    sources, references = zip(*pairs())
    print(
        "| file | well-formed | tags equal | chrF inside tags | BLEU stripped | closing tags "
        "compared | punctuation inside as the reference | outside as the reference | "
        "both sides as the reference |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        outputs = Path(path).read_text().splitlines()
        s = tag_scores(sources, references, outputs)
        compared = inside = outside = both = 0
        for reference, output in zip(references, outputs):
            if re.findall(TAG, output) != re.findall(TAG, reference):
                continue
            for (ri, ro), (oi, oo) in zip(edges(reference), edges(output)):
                compared += 1
                inside += ri == oi
                outside += ro == oo
                both += (ri, ro) == (oi, oo)
        print(
            f"| {path} | {s['well_formed']:.3f} | {s['tags_equal']:.3f} | "
            f"{s['chrf_inside_tags']:.2f} | {s['bleu_stripped']:.2f} | {compared} | "
            f"{inside} | {outside} | {both} |"
        )


def time_tags(outputs_path: str) -> None:
    import statistics

    import tensorflow as tf

    from keras_transformer.data import markup as mk

    sources = [s for s, _ in pairs()]
    texts = [re.sub(mk.TAG, "", o) for o in Path(outputs_path).read_text().splitlines()]
    parse = tf.function(mk.parse_markup, input_signature=[tf.TensorSpec([None], tf.string)])
    insert = tf.function(mk.insert_tags)
    batches = [(sources[i : i + 32], texts[i : i + 32]) for i in range(0, len(sources), 32)]

    def one_pass():
        parsing = inserting = 0.0
        for source, text in batches:
            links = tf.zeros([len(source), max(len(t.split()) for t in text)], tf.int32)
            start = time.perf_counter()
            parsed = parse(tf.constant(source))
            parsed.text.numpy()
            middle = time.perf_counter()
            insert(parsed, tf.constant(text), links).numpy()
            parsing, inserting = parsing + middle - start, inserting + time.perf_counter() - middle
        return parsing, inserting

    for _ in range(2):
        one_pass()  # traces
    times = [one_pass() for _ in range(15)]
    print(
        f"parse {statistics.median(t[0] for t in times) * 1000:.0f} ms, "
        f"insert {statistics.median(t[1] for t in times) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    if sys.argv[1] == "translate":
        translate(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "time":
        time_tags(sys.argv[2])
    else:
        score(*sys.argv[2:])
