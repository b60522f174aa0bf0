"""Markup transfer, protected spans, word alignments and their speed, through the export.

    python benchmarks/run.py markup transfer --model-dir RUN [--baseline-export DIR]

On a trained run's export (made here unless `--export-dir`), all through the loaded
SavedModel's signatures:

- tags: `translate_markup` on a tagged dev set (`--tagged`, default the corpus script's 460
  pairs of the bundled `en_de.dev.tagged.tsv.gz`; the 36 hand-tagged dev pairs of
  benchmarks/data/tagged_dev.tsv add nested and self-closing cases): the share of outputs
  that are well-formed XML and whose tags (names, attributes, order, nesting) equal the
  source's; chrF of the text inside each element against the same element of the
  reference; BLEU of the tag-stripped outputs against the stripped references, beside
  `serving_default` on the stripped sources;
- spans: the dev split's sentences holding a protected span (`data.protected_spans`): the share
  of spans that come back verbatim from `serving_default` (before) and `translate_markup`
  (after), and BLEU of both on those sentences;
- alignments: precision, recall and AER of `align` on the hand-annotated gold pairs
  (benchmarks/data/alignment_gold.tsv), and of every layer/head choice in process;
- speed: sentences/s of `serving_default` and `translate_markup` on plain dev sentences in
  batches of `--batch-size`, alternating, median of `--rounds`; with `--baseline-export` (an
  export made before this work) also its `serving_default`, for the before/after of the plain
  path.

Markdown on stdout, JSON with machine, versions and command in `--json`.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sacrebleu  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import flags  # noqa: E402
from benchmarks.serving_benchmark import environment  # noqa: E402
from keras_transformer import artifacts  # noqa: E402
from keras_transformer.data.corpus import SAMPLE_DIR, read_pairs  # noqa: E402
from keras_transformer.data.corpus_files import open_binary  # noqa: E402
from keras_transformer.data.protected_spans import protected_words  # noqa: E402
from keras_transformer.decoding import alignments as al  # noqa: E402
from keras_transformer.decoding.markup_evaluation import strip_tags, tag_scores  # noqa: E402

DATA = Path(__file__).parent / "data"


def read_tsv(path: Path) -> list[list[str]]:
    """The tab-split lines of a plain or `.gz` file, less blank and `#` lines."""
    with open_binary(Path(path)) as file:
        lines = file.read().decode("utf-8").splitlines()
    return [line.split("\t") for line in lines if line and not line.startswith("#")]


def run_batches(function, key: str, texts: list[str], batch: int = 32) -> list:
    out = []
    for start in range(0, len(texts), batch):
        result = function(**{key: tf.constant(texts[start : start + batch])})
        out.append({k: v.numpy() for k, v in result.items()})
    return [dict(zip(out[0], values)) for part in out for values in zip(*part.values())]


def tag_transfer(signatures, pairs) -> dict:
    sources, references = [p[0] for p in pairs], [p[1] for p in pairs]
    marked = run_batches(signatures["translate_markup"], "text", sources)
    outputs = [row["translations"].decode() for row in marked]
    plain = run_batches(signatures["serving_default"], "text", [strip_tags(s) for s in sources])
    scores = tag_scores(sources, references, outputs)
    stripped = [[strip_tags(r) for r in references]]
    plain_texts = [r["translations"].decode() for r in plain]
    return {
        **scores,
        "warnings": sum(bool(row["warnings"]) for row in marked),
        "bleu_plain": sacrebleu.corpus_bleu(plain_texts, stripped).score,
        "examples": list(zip(sources[:3], outputs[:3])),
    }


def span_recovery(signatures, limit: int) -> dict:
    pairs = list(read_pairs("sample_en_de", "dev"))
    spans = protected_words(tf.constant([s for s, _ in pairs])).to_list()
    chosen = [(p, [w.decode() for w in row if w]) for p, row in zip(pairs, spans) if any(row)]
    chosen = chosen[:limit]
    sources = [p[0] for p, _ in chosen]
    result = {"sentences": len(chosen), "spans": sum(len(s) for _, s in chosen)}
    for name, signature in (("before", "serving_default"), ("after", "translate_markup")):
        outputs = [r["translations"].decode() for r in run_batches(signatures[signature],
                                                                    "text", sources)]  # fmt: skip
        kept = sum(span in out for (_, row), out in zip(chosen, outputs) for span in row)
        result[f"verbatim_{name}"] = kept / max(result["spans"], 1)
        refs = [p[1] for p, _ in chosen]
        result[f"bleu_{name}"] = sacrebleu.corpus_bleu(outputs, [refs]).score
    return result


def alignment_quality(signatures, model_dir: str) -> dict:
    gold = read_tsv(DATA / "alignment_gold.tsv")
    sources, targets, truth = zip(*gold)
    served = signatures["align"](source=tf.constant(sources), target=tf.constant(targets))
    result = {"gold_pairs": len(gold), "gold_links": sum(len(t.split()) for t in truth)}
    result["served"] = al.alignment_quality([a.decode() for a in served["alignments"].numpy()],
                                            truth)  # fmt: skip
    model, _, tokenizer = artifacts.load_trained(model_dir)
    starts = al.word_start_table(tokenizer.model_proto)
    choices = {}
    for row in al.ROWS:
        for layer in range(model.config.num_layers):
            for head in [None, *range(model.config.num_heads)]:
                out = al.align_tensors(model, tokenizer, sources, targets, starts,
                                       layer=layer, head=head, row=row)  # fmt: skip
                links = [a.decode() for a in out["alignments"].numpy()]
                name = f"{row} layer {layer} {'mean' if head is None else f'head {head}'}"
                choices[name] = al.alignment_quality(links, truth)["aer"]
    result["aer_by_choice"] = choices
    return result


def speed(signatures, baseline, sentences: list[str], batch: int, rounds: int) -> dict:
    systems = {"serving_default": signatures["serving_default"],
               "translate_markup": signatures["translate_markup"]}  # fmt: skip
    if baseline is not None:
        systems["serving_default (baseline export)"] = baseline["serving_default"]
    times = {name: [] for name in systems}
    for function in systems.values():  # warm-up: trace and first run
        function(text=tf.constant(sentences[:batch]))
    for _ in range(rounds):
        for name, function in systems.items():
            start = time.perf_counter()
            run_batches(function, "text", sentences, batch)
            times[name].append(time.perf_counter() - start)
    return {name: len(sentences) / statistics.median(t) for name, t in times.items()}


def main(argv=None, prog: str = "python benchmarks/run.py markup transfer") -> int:
    parser = flags.parser(prog, __doc__)
    flags.add(parser, model_dir={"required": True}, json=None)
    parser.add_argument("--export-dir", default=None, help="default: export the run here")
    parser.add_argument("--baseline-export", default=None, help="an export made before")
    parser.add_argument(
        "--tagged",
        default=str(SAMPLE_DIR / "en_de.dev.tagged.tsv.gz"),
        help="tagged pairs, TSV plain or .gz (default: the bundled dev.tagged file; "
        "benchmarks/data/tagged_dev.tsv: the hand-tagged pairs)",
    )
    parser.add_argument("--span-sentences", type=int, default=200)
    parser.add_argument("--speed-sentences", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", default="tags,spans,alignments,speed", help="which to run")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        export_dir = args.export_dir
        if export_dir is None:
            from keras_transformer.config import SearchOptions
            from keras_transformer.serving.export import export_savedmodel

            search = SearchOptions(alpha=artifacts.run_eval_alpha(args.model_dir))  # as the CLI
            export_dir = export_savedmodel(args.model_dir, workdir, search=search)
        signatures = tf.saved_model.load(export_dir).signatures
        baseline = args.baseline_export and tf.saved_model.load(args.baseline_export).signatures
        parts = args.parts.split(",")
        result = {"command": flags.command(prog, argv or [])}
        if "tags" in parts:
            result["tags"] = tag_transfer(signatures, read_tsv(Path(args.tagged)))
        if "spans" in parts:
            result["spans"] = span_recovery(signatures, args.span_sentences)
        if "alignments" in parts:
            result["alignments"] = alignment_quality(signatures, args.model_dir)
        if "speed" in parts:
            plain = [s for s, _ in read_pairs("sample_en_de", "dev")][: args.speed_sentences]
            result["sentences_per_s"] = speed(
                signatures, baseline or None, plain, args.batch_size, args.rounds
            )
    args.export_dir = export_dir
    result["environment"] = environment(args)
    print(report(result))
    flags.write_json(result, args.json)
    return 0


def report(result: dict) -> str:
    lines = []
    if "tags" in result:
        lines += _tag_lines(result["tags"])
    if "spans" in result:
        lines += _span_lines(result["spans"])
    if "alignments" in result:
        lines += _alignment_lines(result["alignments"])
    if "sentences_per_s" in result:
        rates = result["sentences_per_s"].items()
        lines.append("sentences/s: " + ", ".join(f"{k} {v:.1f}" for k, v in rates))
    return "\n".join(lines)


def _tag_lines(tags: dict) -> list[str]:
    return [
        f"tags ({tags['sentences']} pairs): well-formed {tags['well_formed']:.1%}, equal "
        f"{tags['tags_equal']:.1%}, warnings {tags['warnings']}, chrF inside tags "
        f"{tags['chrf_inside_tags']:.1f}",
        f"BLEU tag-stripped {tags['bleu_stripped']:.2f} vs without markup {tags['bleu_plain']:.2f}",
    ]


def _span_lines(spans: dict) -> list[str]:
    return [
        f"spans ({spans['spans']} in {spans['sentences']} sentences): verbatim "
        f"{spans['verbatim_before']:.1%} before, {spans['verbatim_after']:.1%} after; BLEU "
        f"{spans['bleu_before']:.2f} before, {spans['bleu_after']:.2f} after",
    ]


def _alignment_lines(aligned: dict) -> list[str]:
    return [
        f"alignments ({aligned['gold_pairs']} gold pairs, {aligned['gold_links']} links): "
        + ", ".join(f"{k} {v:.3f}" for k, v in aligned["served"].items()),
        "AER by choice: " + ", ".join(f"{k} {v:.3f}" for k, v in aligned["aer_by_choice"].items()),
    ]
