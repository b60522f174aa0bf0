"""CTranslate2 (decode only): our same random Keras model converted with
`keras_transformer.serving.ctranslate2_export`, decoded by `ctranslate2.Translator` with beam
search of exactly `out_length` tokens (min = max decoding length: EOS cannot end it sooner),
each compute type in a process of its own (`benchmarks.ctranslate2_process`: two translators
in one process slow each other down)."""

from __future__ import annotations

import importlib.util
import os
import tempfile

import numpy as np

from benchmarks.peers.spec import Spec, decode_sources
from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID

EXPORTER = "keras_transformer.serving.ctranslate2_export"
COMPUTE_TYPES = ("float32", "int8")


def missing() -> str | None:
    """Why the CTranslate2 rows cannot run here, or None."""
    if importlib.util.find_spec("ctranslate2") is None:
        return "ctranslate2 is not installed"
    if importlib.util.find_spec(EXPORTER) is None:
        return f"{EXPORTER} does not exist yet (no converter for our model)"
    return None


def vocabulary(vocab_size: int) -> list[str]:
    """One token string per id: the special pieces at our special ids, then w4, w5, ..."""
    special = {PAD_ID: "<pad>", UNK_ID: "<unk>", BOS_ID: "<s>", EOS_ID: "</s>"}
    return [special.get(i, f"w{i}") for i in range(vocab_size)]


def load(model, compute_type: str = "float32"):
    """A `ctranslate2_process.Worker` translating `model` (converted in float32; int8
    quantizes at load) in a process of its own."""
    from benchmarks.ctranslate2_process import Worker
    from keras_transformer.serving.ctranslate2_export import export_ctranslate2

    with tempfile.TemporaryDirectory() as workdir:  # the worker reads it all before "ready"
        tokens = vocabulary(model.config.vocab_size)
        path = export_ctranslate2(model, os.path.join(workdir, "model"), tokens)
        return Worker(path, None, compute_type)


def make_decode(spec: Spec, model, compute_type: str = "float32", translator=None):
    """`(run() -> output lengths (batch,), parameters)`; `translator` from `load` (reused
    across output lengths), else converted here. `run` is timed from this process: the pipe
    to the worker adds well under a millisecond to calls of hundreds."""
    translator = translator or load(model, compute_type)
    tokens = vocabulary(spec.vocab_size)
    source = [[tokens[i] for i in row[:-1]] for row in decode_sources(spec)]  # it adds EOS

    def run() -> np.ndarray:
        lengths = translator.translate_tokens(
            source, beam_size=spec.beam, length_penalty=0.6, max_batch_size=spec.batch,
            min_decoding_length=spec.out_length, max_decoding_length=spec.out_length,
        ).outputs  # fmt: skip
        return np.array(lengths)

    return run, model.count_params()
