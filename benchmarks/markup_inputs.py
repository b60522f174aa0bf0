"""What the dated markup results scripts share (`benchmarks/results/2026-11-2*`): a trained
run's `translate_lines` (the path of `keras-transformer-translate --markup` and the export's
`translate_markup`) and the pair's tagged dev sets.

    from benchmarks.markup_inputs import markup_translator, tagged_pairs, with_value
    translate = markup_translator("runs/sample_en_de")  # list of str -> list of str
"""

from __future__ import annotations

import gzip
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "keras_transformer/data/sample"
HAND_TAGGED = Path(__file__).resolve().parent / "data/tagged_dev.tsv"


def markup_translator(run: str):
    """A run's model as `translate_lines` runs it (the run's alpha and alignment choice) ->
    a function from a list of inputs to their translations (tags and spans restored)."""
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_translation import translate_lines

    model, _, tokenizer = artifacts.load_trained(run)
    options = SearchOptions(alpha=artifacts.run_eval_alpha(run))
    translator = Translator(model, tokenizer, options, alignment=artifacts.run_alignment(run))

    def translate(texts: list) -> list:
        return [text for text, _, _ in translate_lines(translator, texts)[0]] if texts else []

    return translate


def with_value(text: str, value: str) -> str:
    """`text` with `value` in parentheses before its final punctuation ("Click OK.", "3 pm"
    -> "Click OK (3 pm).")."""
    stem, end = (text[:-1], text[-1]) if text[-1] in ".!?" else (text, "")
    return f"{stem} ({value}){end}"


def tagged_pairs(pair: str) -> list:
    """(source, reference) of the pair's tagged dev set (`sample_en_de`: with the
    hand-tagged pairs of `benchmarks/data/tagged_dev.tsv`)."""
    path = SAMPLE / f"{pair[len('sample_') :]}.dev.tagged.tsv.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        pairs = [line.split("\t")[:2] for line in f.read().splitlines()]
    if pair != "sample_en_de":
        return pairs
    lines = HAND_TAGGED.read_text(encoding="utf-8").splitlines()
    return pairs + [line.split("\t")[:2] for line in lines if line and not line.startswith("#")]


def restored_references(run: str, pairs: list) -> list:
    """`restore_spans` on human translations, as if the model had written them: each
    (source, reference) aligned by the run's alignment choice, as `translate_markup` aligns
    a translation -> the references after it (each change damages a person's translation)."""
    import tensorflow as tf

    from keras_transformer import artifacts
    from keras_transformer.data.protected_spans import restore_spans, span_patterns
    from keras_transformer.decoding.alignments import align_tensors, word_start_table
    from keras_transformer.tracing import graph_function

    model, _, tokenizer = artifacts.load_trained(run)
    starts = word_start_table(tokenizer.model_proto)
    choice = artifacts.run_alignment(run).kwargs()
    patterns = span_patterns(tokenizer.model_proto)

    @graph_function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def restore(sources, references):
        links = align_tensors(model, tokenizer, sources, references, starts, **choice)
        return restore_spans(sources, references, links["source_index"], patterns)

    out = []
    for i in range(0, len(pairs), 64):
        batch = pairs[i : i + 64]
        got = restore(tf.constant([s for s, _ in batch]), tf.constant([t for _, t in batch]))
        out += [t.decode("utf-8") for t in got.numpy()]
    return out


def restore_cost(sources: list, outputs: list, calls: int = 400) -> str:
    """`restore_spans` of 64 `sources` and `outputs` (each output word linked to the source
    word at its place) in a `tf.function`: median ms of `calls` calls at batch 1 and 64."""
    import time

    import numpy as np
    import tensorflow as tf

    from keras_transformer.data.protected_spans import restore_spans
    from keras_transformer.tracing import graph_function

    links = tf.ragged.constant([[min(j, len(s.split()) - 1) for j in range(len(t.split()))]
                                for s, t in zip(sources, outputs)]).to_tensor(-1)  # fmt: skip
    restore = graph_function(restore_spans)
    times = []
    for batch in (1, 64):
        args = (tf.constant(sources[:batch]), tf.constant(outputs[:batch]), links[:batch])
        for _ in range(20):
            restore(*args)
        took = []
        for _ in range(calls):
            start = time.perf_counter()
            restore(*args).numpy()
            took.append(time.perf_counter() - start)
        times.append(f"batch {batch}: {1e3 * np.median(took):.3f} ms")
    return " ".join(times)
