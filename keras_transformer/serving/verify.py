"""Check a SavedModel export against the in-process Translator.

    result = compare("runs/sample_en_de", "runs/sample_en_de/export/transformer/1", sources)
    # {"sentences": 1000, "mismatches": [], "max_score_diff": 2.4e-07}

Both translate the same batches with the same beam settings (pass the `SearchOptions` and the
weights the export was made with). Command line: `keras-transformer-verify-export`
(`python export/verify_export.py`), which exits non-zero on any mismatch: run it before
rolling a new version out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.config import SearchOptions
from keras_transformer.decoding.translator import Translator
from keras_transformer.serving.signatures import INPUT_KEY, SERVING_SIGNATURE


def compare(
    model_dir: str,
    export_dir: str,
    sources: Sequence[str],
    search: SearchOptions | None = None,
    weights: str | None = None,
    batch_size: int = 64,
) -> dict:
    """Translate `sources` with the export's `serving_default` signature and with a
    `Translator` over the weights in `model_dir`.

    Returns `{"sentences": int, "mismatches": [indices of differing translations],
    "max_score_diff": float}`.
    """
    if not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive int. Received: batch_size={batch_size!r}")
    model, _, tokenizer = artifacts.load_trained(model_dir, weights)
    translator = Translator(model, tokenizer, search)
    serving = tf.saved_model.load(export_dir).signatures[SERVING_SIGNATURE]
    mismatches, max_score_diff = [], 0.0
    for start in range(0, len(sources), batch_size):
        batch = tf.constant(list(sources[start : start + batch_size]))
        local = translator.translate_tensors(batch)
        served = serving(**{INPUT_KEY: batch})
        same = local["translations"].numpy() == served["translations"].numpy()
        mismatches += [start + int(i) for i in np.flatnonzero(~same)]
        diff = np.abs(local["scores"].numpy() - served["scores"].numpy()).max()
        max_score_diff = max(max_score_diff, float(diff))
    return {"sentences": len(sources), "mismatches": mismatches, "max_score_diff": max_score_diff}
