"""Check a SavedModel export against the in-process Translator.

    result = compare("runs/sample_en_de", "runs/sample_en_de/export/transformer/1", sources)
    # {"sentences": 1000, "mismatches": [], "max_score_diff": 2.4e-07}

Both translate the same batches with the same beam settings (pass the `SearchOptions` and the
weights the export was made with). Command line: `keras-transformer-verify-export`
(`python export/verify_export.py`), which exits non-zero on any mismatch: run it before
rolling a new version out. Run on a serving machine, it also names each kernel layout the
export chose (`export_info.json`: padded or transposed decoder kernels, chosen by the CPU
that exported) that this machine's rule would not choose (`layout_notes`): the same
translations, a matter of speed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.config import SearchOptions
from keras_transformer.decoding.search import default_pad_kernels, default_transpose_kernels
from keras_transformer.decoding.translator import Translator
from keras_transformer.serving.signatures import INPUT_KEY, SERVING_SIGNATURE


def machine_layout(d_model: int, jit_compile: bool) -> dict:
    """The kernel layouts an export made on this machine would get (its translator's
    defaults), for a model of width `d_model`, with or without XLA (an XLA export searches
    batches of up to `XLA_MAX_ROWS` rows on fixed buffers, larger ones on growing buffers,
    which may pad): `{"pad_kernels": bool, "transpose_kernels": bool}`."""
    return {
        "pad_kernels": default_pad_kernels(padded_decode=False),
        "transpose_kernels": default_transpose_kernels(d_model, jit_compile),
    }


# export_info key (and, dashed, the export's flag): what the export does when true, when false
LAYOUTS = {
    "pad_kernels": ("pads the decoder's kernels", "does not pad the decoder's kernels"),
    "transpose_kernels": (
        "reads the decoder's kernels transposed",
        "reads the decoder's kernels as stored",
    ),
}


def layout_notes(info: dict, here: dict) -> list[str]:
    """One line for each kernel layout of an export's `info` (`export.read_export_info`) that
    differs from `here` (`machine_layout`); none for an export without the record."""
    notes = []
    traced = ", ".join(info.get("traced_on", {}).get("cpu_flags", [])) or "unknown flags"
    for key, (does, does_not) in LAYOUTS.items():
        if key not in info or bool(info[key]) == bool(here[key]):
            continue
        flag = "--" + key.replace("_", "-")  # keras-transformer-export's
        export_does = does if info[key] else does_not
        notes.append(
            f"kernel layout: the export {export_does} (traced on a CPU with {traced}); this "
            f"machine's rule would {'' if here[key] else 'not '}do so. "
            f"The same translations; for speed on servers like this one, export again here "
            f"or with {flag} {'on' if here[key] else 'off'}"
        )
    return notes


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
