"""The quick preset's dropout, chosen by the size of the training corpus.

    cfg = regularization.resolve(cfg)   # before the run's config is saved

A ten-minute run of the quick preset sees its corpus many times over: some 20M target tokens
in 2600 updates, tens of epochs of the bundled 27k pairs and hundreds of a 5k-pair corpus. On
the bundled corpus dropout only slows it; on small corpora the model learns them by heart
and dropout pays. Measured under the same 2600-step budget
(benchmarks/results/small_corpora.md): `SMALL_CORPUS_DROPOUT` beats no dropout on every
corpus under `SMALL_CORPUS_WORDS` source words that we tried (12k, 63k and 142k words: +3.1,
+1.1 and +2.8 dev BLEU), and loses 2.1 on the bundled corpus (392k words) above it.

`resolve` sets the preset's dropout explicitly (the run's `training_config.json` records it,
so a resumed run keeps it; a child of `--init-from` is sized by its own corpus, its recipe
being its own); a `--dropout` on the command line and the other presets keep theirs.
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


def resolve(cfg: TrainingConfig) -> TrainingConfig:
    """`cfg` with the quick preset's dropout set by corpus size (unchanged otherwise)."""
    if cfg.architecture.model != "quick" or cfg.architecture.dropout is not None:
        return cfg
    words = corpus_words(cfg, SMALL_CORPUS_WORDS)
    small = words < SMALL_CORPUS_WORDS
    dropout = SMALL_CORPUS_DROPOUT if small else 0.0
    logger.info(
        "Dropout %.1f for %s (%s source words%s; --dropout sets it)", dropout,
        cfg.data.dataset, f"{words:,}", ", a small corpus" if small else " or more",
    )  # fmt: skip
    return cfg.replace(dropout=dropout)
