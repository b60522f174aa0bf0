"""The quick preset's dropout, chosen by the size of the training corpus: a rule of the
recipes that train the quick model on a CPU (`cpu_quick`, `own_corpus`), not of the
architecture, which has none (`keras_transformer.recipes`). It is the one None of a recipe's
config that needs the corpus, so `runner.resolve_config` applies it (after the warm start,
before `recipes.complete`) and the run prints and saves the value.

    cfg = regularization.with_quick_preset_dropout(cfg)   # before the run's config is saved

A ten-minute run of the quick preset sees its corpus many times over: tens of epochs of the
bundled corpus and hundreds of a corpus of a few thousand pairs. On the bundled corpus dropout
only slows it; on small corpora the model learns them by heart and dropout pays. The
threshold and the rate come from a study of dropout by corpus size under the same update
budget, in which `SMALL_CORPUS_DROPOUT` won on every corpus under `SMALL_CORPUS_WORDS` source
words and lost on the bundled corpus above it (benchmarks/results/small_corpora.md, "Dropout",
and its command: `python benchmarks/run.py recipe budget --steps 2600 ...`).

`with_quick_preset_dropout` sets the preset's dropout explicitly (the run's
`training_config.json` records it, so a resumed run keeps it; a child of `--init-from` is
sized by its own corpus, its recipe being its own); a `--dropout` on the command line and the
other presets keep theirs.
"""

from __future__ import annotations

import logging

from keras_transformer.config import TrainingConfig

logger = logging.getLogger("keras_transformer")

SMALL_CORPUS_WORDS = 300_000  # source words (whitespace-separated) of the train split
SMALL_CORPUS_DROPOUT = 0.1


def corpus_words(cfg: TrainingConfig, limit: int) -> int:
    """Source words of the run's train split, counted up to `limit` (reading stops there)."""
    from keras_transformer.data import corpus

    words = 0
    for source, _ in corpus.read_split(cfg.data, "train"):
        words += len(source.split())
        if words >= limit:
            break
    return words


def quick_preset_dropout(source_words: int) -> float:
    """The quick preset's dropout for a train split of `source_words` source words:
    `SMALL_CORPUS_DROPOUT` under `SMALL_CORPUS_WORDS`, else none (0.0)."""
    return SMALL_CORPUS_DROPOUT if source_words < SMALL_CORPUS_WORDS else 0.0


def with_quick_preset_dropout(cfg: TrainingConfig) -> TrainingConfig:
    """`cfg` with the quick preset's dropout set by its corpus size (`quick_preset_dropout`);
    unchanged for another preset or a given `dropout`."""
    if cfg.architecture.model != "quick" or cfg.architecture.dropout is not None:
        return cfg
    words = corpus_words(cfg, SMALL_CORPUS_WORDS)
    dropout = quick_preset_dropout(words)
    logger.info(
        "Dropout %.1f for %s (%s source words%s; --dropout sets it)", dropout,
        cfg.data.dataset, f"{words:,}",
        ", a small corpus" if words < SMALL_CORPUS_WORDS else " or more",
    )  # fmt: skip
    return cfg.replace(dropout=dropout)
