"""BLEU and chrF of beam-search translations, scored with sacrebleu.

    result = evaluate_bleu(model, tokenizer, pairs, SearchOptions(beam_size=4, alpha=0.6))
    print(format_report(result))

Three figures, all on detokenized hypotheses against the raw references:
- `bleu`: sacrebleu's standard BLEU (its own "13a" tokenization, case-sensitive), the figure
  to compare across papers, reported with its signature;
- `chrf`: sacrebleu's chrF (character 6-grams, beta 2), with its signature;
- `tokenized_bleu`: a paper-style BLEU. The paper's numbers are multi-bleu.perl on
  Moses-tokenized text (tensor2tensor also split hyphenated compounds for En-De). Here
  sacrebleu tokenizes both sides with its "intl" tokenizer, which, like Moses, splits off all
  Unicode punctuation and symbols (German „“ and French « » quotes, hyphens between words)
  and then counts whitespace tokens as multi-bleu.perl does. It needs no Moses install; like
  every tokenized BLEU it depends on the tokenizer, so it is not comparable across setups.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Iterable
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from keras_transformer.config import DocumentOptions, SearchOptions
from keras_transformer.decoding.translator import Translator
from keras_transformer.model import Transformer

logger = logging.getLogger("keras_transformer")


def score_translations(hypotheses: list[str], references: list[str]) -> dict:
    """sacrebleu BLEU (13a), chrF and tokenized ("intl") BLEU of detokenized hypotheses."""
    if len(hypotheses) != len(references):
        raise ValueError(f"Got {len(hypotheses)} hypotheses for {len(references)} references.")
    result = {"num_sentences": len(hypotheses)}
    metrics = {"bleu": BLEU(), "chrf": CHRF(), "tokenized_bleu": BLEU(tokenize="intl")}
    for name, metric in metrics.items():
        score = metric.corpus_score(hypotheses, [references])
        result[name] = float(score.score)
        result[f"{name}_signature"] = str(metric.get_signature())
        result[f"{name}_text"] = str(score)
    return result


def write_lines(path: str, lines: Iterable[str]) -> None:
    """One line per hypothesis (line breaks inside a hypothesis become spaces)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(" ".join(line.splitlines()) + "\n")


def evaluate_bleu(
    model: Transformer,
    tokenizer,
    pairs: Iterable[tuple[str, str]],
    search: SearchOptions | None = None,
    batch_size: int = 64,
    output_path: str | None = None,
    progress: bool = True,
    documents: DocumentOptions | None = None,
) -> dict:
    """Translate the sources of `pairs` with beam search and score them against the targets.

    Args:
        model, tokenizer: as from `keras_transformer.artifacts.load_trained`.
        pairs: `(source, reference)` strings, e.g. `corpus.read_pairs("sample_en_de", "test")`.
        search: `SearchOptions` (default: the paper's beam 4, alpha 0.6, +50 tokens).
        batch_size: sources per batch; batches hold sources of similar length.
        output_path: where to write the hypotheses, one per line in the input order.
        progress: show a tqdm progress bar.
        documents: how sources are split (default `DocumentOptions.sentences()`: each source
            is one sentence, as test sets are; `DocumentOptions()` translates documents).

    Returns:
        A JSON-serializable dict: `bleu`, `chrf`, `tokenized_bleu` (floats, 0-100), each with
        `*_signature` (sacrebleu's) and `*_text` (the full score line), `num_sentences`,
        `beam_size`, `alpha`, `mean_score` (of the hypotheses' length-normalized
        log-probabilities) and `hypotheses_path`.
    """
    pairs = list(pairs)
    if not pairs:
        raise ValueError("pairs is empty: nothing to evaluate.")
    sources = [source for source, _ in pairs]
    references = [reference for _, reference in pairs]
    search = search or SearchOptions()
    documents = documents or DocumentOptions.sentences()
    translator = Translator(model, tokenizer, search, documents=documents)
    hypotheses, scores = translator.translate(sources, batch_size=batch_size, progress=progress)
    result = score_translations(hypotheses, references)
    result.update(
        beam_size=search.beam_size,
        alpha=search.alpha,
        mean_score=float(sum(scores) / len(scores)),
        hypotheses_path=output_path,
    )
    if output_path:
        write_lines(output_path, hypotheses)
        logger.info("Wrote %d hypotheses to %s", len(hypotheses), output_path)
    return result


def group_documents(count: int, min_lines: int, max_lines: int, seed: int = 0) -> list[range]:
    """Consecutive line indices `0..count-1` in groups of `min_lines` to `max_lines` lines
    (sizes drawn uniformly with `seed`; the last group may be shorter)."""
    if not 1 <= min_lines <= max_lines:
        raise ValueError(
            "Document sizes must satisfy 1 <= min_lines <= max_lines. "
            f"Received: min_lines={min_lines!r}, max_lines={max_lines!r}"
        )
    draw, groups, start = random.Random(seed), [], 0
    while start < count:
        size = draw.randint(min_lines, max_lines)
        groups.append(range(start, min(start + size, count)))
        start += size
    return groups


@dataclass(frozen=True)
class DocumentGrouping:
    """How `evaluate_documents` joins consecutive pairs into documents: `lines` (min, max)
    lines each, lengths drawn with `seed`, lines joined by `separator`."""

    lines: tuple[int, int] = (2, 12)
    separator: str = " "
    seed: int = 0


def evaluate_documents(
    model: Transformer,
    tokenizer,
    pairs: Iterable[tuple[str, str]],
    search: SearchOptions | None = None,
    documents: DocumentOptions | None = None,
    grouping: DocumentGrouping = DocumentGrouping(),
    batch_size: int = 64,
    progress: bool = True,
) -> dict:
    """Document BLEU: consecutive pairs joined into documents as `grouping` says, each
    document translated whole (as `documents` says: default `DocumentOptions()`, segmented),
    against the same lines translated one by one (each as one sentence) and joined; both
    scored against the joined references.

    Returns `{"document": score_translations(...), "lines": score_translations(...),
    "num_documents", "num_lines", "separator", "hypotheses": document translations}`."""
    pairs = list(pairs)
    if not pairs:
        raise ValueError("pairs is empty: nothing to evaluate.")
    search = search or SearchOptions()
    lines, separator = grouping.lines, grouping.separator
    groups = group_documents(len(pairs), *lines, seed=grouping.seed)
    sources, references = zip(*pairs)
    join = lambda texts: [separator.join(texts[i] for i in group) for group in groups]  # noqa: E731
    one_by_one = Translator(model, tokenizer, search, documents=DocumentOptions.sentences())
    line_hypotheses, _ = one_by_one.translate(sources, batch_size=batch_size, progress=progress)
    whole = Translator(model, tokenizer, search, documents=documents or DocumentOptions())
    document_hypotheses, _ = whole.translate(
        join(sources), batch_size=max(1, batch_size // lines[1]), progress=progress
    )
    return {
        "document": score_translations(document_hypotheses, join(references)),
        "lines": score_translations(join(line_hypotheses), join(references)),
        "num_documents": len(groups),
        "num_lines": len(pairs),
        "separator": separator,
        "hypotheses": document_hypotheses,
    }


def format_report(result: dict) -> str:
    """The figures of `evaluate_bleu` as printable lines."""
    return "\n".join(
        [
            f"sentences: {result['num_sentences']}  beam: {result.get('beam_size')}  "
            f"alpha: {result.get('alpha')}",
            f"{result['bleu_text']}",
            f"  signature: {result['bleu_signature']}",
            f"{result['chrf_text']}",
            f"  signature: {result['chrf_signature']}",
            f"tokenized (intl) {result['tokenized_bleu_text']}",
            f"  signature: {result['tokenized_bleu_signature']}",
        ]
    )
