"""Export a trained model directory as a SavedModel that stock TensorFlow Serving can load.

    path = export_savedmodel("runs/en_de", "serving/models", search=SearchOptions(beam_size=4))
    # -> serving/models/transformer/<version>/  (TF Serving layout, integer versions)

Command line: `keras-transformer-export` (`python export/export_savedmodel.py`, or
`python -m keras_transformer.cli.export`).

The export is one `tf.Module` holding the Keras model and the SentencePiece tokenizer, with
seven signatures that take strings:

    serving_default   text: string (batch,) -> translations: string (batch,),
                                                scores: float32 (batch,)
    translate_nbest   text: string (batch,) -> translations: string (batch, n_best),
                                                scores: float32 (batch, n_best)
    translate_sample  text: string (batch,), temperature: float64 (), top_k: int64 (),
                      top_p: float64 (), seed: int64 ()
                                            -> translations: string (batch,),
                                                scores: float32 (batch,)
    score             source: string (batch,), target: string (batch,)
                                            -> log_prob, per_token, score: float32 (batch,)
    segment           text: string (batch,) -> segments: string (batch, max_segments),
                                                num_segments: int32 (batch,)
    translate_markup  text: string (batch,) -> translations, alignments, warnings: string
                                                (batch,), scores: float32 (batch,)
    align             source: string (batch,), target: string (batch,)
                                            -> alignments: string (batch,)

`translate_markup` takes inputs with inline XML/HTML tags and returns them translated with
the tags around the aligned words, protected spans (URLs, numbers, placeholders, words the
vocabulary cannot write, ...) verbatim, Moses "i-j" word alignments and a warning where
markup was malformed (translated as text); `align` aligns given pairs
(`decoding.markup_translation`, `decoding.alignments`).
Exports made with `guided=True` (`--guided`) add two:

    translate_guided  text, prefix, constraints, avoid, glossary: string (batch,)
                                            -> translations: string (batch,),
                                               scores: float32 (batch,),
                                               constraints_met: bool (batch,)
    translate_alternatives  the same inputs -> the same outputs, (batch, n_best) each:
                                               n_best continuations of the prefix; fewer
                                               exist: "", score -inf, not met, last

The guided signatures (`keras_transformer.decoding.guided`) take only string (batch,) inputs,
so TF Serving's batching merges their requests; a request over `GuideLimits` fails with
INVALID_ARGUMENT naming the limit. They are in exports made with `guided=True` (`--guided`):
tracing them adds to the export's time.

Beam size, length penalty alpha and n_best are fixed at export time; the sampling inputs are
per request, with defaults in the SignatureDef (`signatures.SAMPLE_INPUTS`: TF Serving >= 2.14
fills an omitted one; older servers need all five). A bad sampling value (temperature <= 0,
top_k < 0, top_p outside (0, 1]) fails the request with INVALID_ARGUMENT; `score` fails the
same way when source and target differ in batch size. The graph holds only stock
TensorFlow ops plus tensorflow-text's three SentencePiece ops (linked into stock TF Serving);
`op_check.unservable_ops` checks this in a process that has not imported tensorflow_text, and
every export is checked before its version directory appears. A version is written under a hidden
temporary name and renamed into place, so a polling server never sees a half-written model.
`assets.extra/tf_serving_warmup_requests` holds sample requests TF Serving replays on load
(`serving.warmup`; under XLA also a sentence of every source width).

Every `text` is a whole input: the signatures split it into sentences, translate all
sentences of the request together and join each input's translations with its own
whitespace, and a sentence longer than the model takes is cut into parts that are all
translated (`keras_transformer.decoding.documents`; `segment` shows the split). An input
over `DocumentOptions.max_input_bytes` (100,000 by default) fails the request with
INVALID_ARGUMENT naming the limit; `DocumentOptions.sentences()` exports the behaviour before
documents (each input one sentence, cut at `max_length - 1` pieces). Bytes that are not valid
UTF-8 become the unknown piece (SentencePiece's own behaviour).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile

import tensorflow as tf

from keras_transformer.checks import check_int
from keras_transformer.config import DocumentOptions, SearchOptions
from keras_transformer.serving.op_check import unservable_ops
from keras_transformer.serving.signatures import GUIDED_SIGNATURES, SIGNATURES
from keras_transformer.serving.translation_module import TranslationModule
from keras_transformer.serving.warmup import (  # noqa: F401  (WARMUP_FILE: read by callers)
    WARMUP_FILE,
    width_warmup,
    write_warmup_file,
)

# What the graph was built with (`export_info`): TF Serving ignores it, people and tools read it.
EXPORT_INFO_FILE = os.path.join("assets.extra", "export_info.json")
# A model name is one directory under the export base, and part of every REST URL
# (/v1/models/NAME:predict): a name with "/" or ".." would write elsewhere and not be served.
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def make_translator(
    model,
    tokenizer,
    search: SearchOptions | None = None,
    jit_compile=False,
    documents: DocumentOptions | None = None,
    pad_kernels: bool | None = None,
    alignment=None,
    transpose_kernels: bool | None = None,
):
    """The `keras_transformer.decoding.Translator` the export serves (whole inputs split into
    sentences as `documents` says; default `DocumentOptions()`; `pad_kernels`, `alignment`
    and `transpose_kernels` as `Translator`'s).

    With `jit_compile` the numeric search runs XLA-compiled on fixed-size buffers
    (`padded_decode`) for beam-search batches of up to `search.XLA_MAX_ROWS` rows, and
    larger ones on growing buffers without XLA; tokenization and detokenization stay outside
    the compiled function. An XLA export stores `E^T` (`Translator(store_output_kernel=True)`):
    a one-sentence request no longer transposes the embedding (measured:
    benchmarks/results/2026-11-29-issue-54-one-thread-split.md).
    """
    from keras_transformer.decoding import Translator

    search = search or SearchOptions()
    if jit_compile:
        search = search.replace(padded_decode=True)
    return Translator(
        model, tokenizer, search, jit_compile=jit_compile, documents=documents,
        pad_kernels=pad_kernels, alignment=alignment, transpose_kernels=transpose_kernels,
        store_output_kernel=jit_compile,
    )  # fmt: skip


def next_version(model_base: str) -> int:
    """One more than the largest integer directory under `model_base`, or 1."""
    if not tf.io.gfile.isdir(model_base):
        return 1
    names = [n.rstrip("/") for n in tf.io.gfile.listdir(model_base)]
    return max((int(n) for n in names if n.isdigit()), default=0) + 1


def check_model_name(model_name) -> str:
    """`model_name` if it is one directory name that a URL carries as it is (`MODEL_NAME`),
    else a ValueError naming it."""
    if not isinstance(model_name, str) or not MODEL_NAME.fullmatch(model_name):
        raise ValueError(
            "model_name must be one directory name of letters, digits, '.', '_' and '-', "
            f"starting with a letter or digit. Received: model_name={model_name!r}"
        )
    return model_name


def save_module(
    module: TranslationModule,
    export_base: str,
    model_name: str = "transformer",
    version: int | None = None,
    check_ops: bool = True,
    info: dict | None = None,
    warm_widths: str = "all",
) -> str:
    """Save `module` as `export_base/model_name/version` (atomically) and return that path;
    `info` (what the graph was built with) goes to its `EXPORT_INFO_FILE`, with the warm-up's
    source widths. `warm_widths`: which signatures of an XLA export the warm-up records send
    a sentence of every source width (`signatures.WIDTH_SIGNATURES`)."""
    check_model_name(model_name)
    model_base = os.path.join(export_base, model_name)
    version = next_version(model_base) if version is None else version
    check_int("version", version)
    final_dir = os.path.join(model_base, str(version))
    if os.path.exists(final_dir):
        raise FileExistsError(f"{final_dir!r} exists: versions are immutable, pick a new one")
    widths, width_signatures = width_warmup(module, warm_widths)
    os.makedirs(model_base, exist_ok=True)
    tmp_dir = tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=model_base)  # ignored by TF Serving
    try:
        tf.saved_model.save(module, tmp_dir, signatures=module.signatures())
        served = SIGNATURES + (GUIDED_SIGNATURES if module.guided else ())
        write_warmup_file(tmp_dir, model_name, signatures=served, widths=widths,
                          width_signatures=width_signatures)  # fmt: skip
        if info is not None:
            shapes = [[len(batch), len(batch[0].split())] for batch in widths]  # a piece a word
            warmup = {"rows_and_pieces": shapes, "signatures": list(width_signatures)}
            info = {**info, "warmup": warmup}
            with open(os.path.join(tmp_dir, EXPORT_INFO_FILE), "w") as f:
                json.dump(info, f, indent=1, sort_keys=True)
        allow_xla = bool(getattr(module.translator, "jit_compile", False))
        bad = unservable_ops(tmp_dir, allow_xla) if check_ops else set()
        if bad:
            raise ValueError(f"The export uses ops stock TF Serving lacks: {sorted(bad)}")
        os.rename(tmp_dir, final_dir)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return final_dir


def export_savedmodel(
    model_dir: str,
    export_base: str,
    model_name: str = "transformer",
    version: int | None = None,
    weights: str | None = None,
    search: SearchOptions | None = None,
    n_best: int = 4,
    jit_compile: bool = False,
    *,
    check_ops: bool = True,
    documents: DocumentOptions | None = None,
    dtype: str = "float32",
    pad_kernels: bool | None = None,
    guided: bool = False,
    transpose_kernels: bool | None = None,
    warm_widths: str = "all",
) -> str:
    """Export the trained model in `model_dir`; returns `export_base/model_name/version`.

    Args:
        model_name: the directory under `export_base`, the name clients use.
        version: an integer directory name; default one more than the latest.
        weights: a `.weights.h5` file; default the final weights, else the latest checkpoint.
        search: the beam search of the translate signatures, fixed in the export (default:
            the paper's, `SearchOptions()`); its `n_best` is not used. Its `alpha` is also
            the length penalty of the sampling and scoring signatures' scores, and its
            `max_extra_length` limits sampled outputs too.
        n_best: the width of `translate_nbest`'s outputs, in [1, search.beam_size].
        jit_compile: XLA-compile the numeric decoding (string ops stay outside it).
        check_ops: refuse to publish an export with ops stock TF Serving lacks.
        documents: how the signatures split whole inputs (default `DocumentOptions()`:
            sentences, overlong ones cut into parts, inputs up to 100,000 bytes);
            `DocumentOptions.sentences()` gives the behaviour before documents.
        dtype: "float32", or "bfloat16": weights and products in bfloat16, layer norms,
            softmax, logits and scores in float32 (`artifacts.load_trained`); for servers
            with bfloat16 units (AMX, AVX512_BF16, GPUs), emulated and slow elsewhere
            (BUILD.md, "A bfloat16 export").
        pad_kernels: whether the search multiplies by padded kernels (`Translator`); None:
            the tracing machine's rule (`padded_kernels.default_pad_kernels`).
        transpose_kernels: with `jit_compile`, whether the search reads the decoder's kernels
            in `(out, in)` order (`Translator`); None: the tracing machine's rule
            (`incremental.transposed_kernels_pay`).
        guided: add `translate_guided` and `translate_alternatives` (prefix, alternatives,
            terminology; growing buffers only: left out under `jit_compile`).
        warm_widths: with `jit_compile`, which signatures the warm-up records send one
            sentence of every source width, so that no one-sentence request compiles once
            served: "all" (each compiled search's signature), "serving_default" or "none"
            (`serving.warmup`).

    The choices the graph was built with (dtype, padded or transposed kernels, XLA, the
    search, the tracing machine's CPU) are written to the version's
    `assets.extra/export_info.json`, so a graph never depends silently on the machine that
    traced it.
    """
    search = search or SearchOptions()
    check_model_name(model_name)
    if not isinstance(n_best, int) or not 1 <= n_best <= search.beam_size:
        raise ValueError(
            f"n_best must be an int in [1, beam_size={search.beam_size}]. "
            f"Received: n_best={n_best!r}"
        )
    try:  # the warm-up file needs its protos: fail before the slow part
        import tensorflow_serving.apis.prediction_log_pb2  # noqa: F401
    except ImportError as error:
        raise ImportError(
            'Export needs tensorflow-serving-api: pip install -e ".[serving]"'
        ) from error
    from keras_transformer import artifacts

    # float32 whatever the process's policy (the training pipeline exports in the process
    # that may have trained in mixed precision): load_trained builds under its own dtype.
    model, _, tokenizer = artifacts.load_trained(model_dir, weights, dtype=dtype)
    alignment = artifacts.run_alignment(model_dir)  # the guided head where the run trained one
    translator = make_translator(
        model, tokenizer, search, jit_compile, documents, pad_kernels, alignment,
        transpose_kernels,
    )  # fmt: skip
    guided = guided and not jit_compile
    module = TranslationModule(translator, model, tokenizer, n_best, guided=guided)
    info = export_info(translator, dtype)
    return save_module(module, export_base, model_name, version, check_ops, info, warm_widths)


def export_info(translator, dtype: str) -> dict:
    """What an export's graph was built with: `dtype`, the translator's padded (or, under XLA,
    transposed) kernels, XLA and search, and the tracing machine's CPU (its x86 vector flags
    that decide kernels)."""
    from keras_transformer import onednn

    flags = sorted(onednn.cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    return {
        "dtype": dtype,
        "pad_kernels": bool(translator.pad_kernels),
        "jit_compile": bool(translator.jit_compile),
        "transpose_kernels": bool(translator.transpose_kernels),
        "output_kernel_stored": translator.output_kernel is not None,
        "search": dataclasses.asdict(translator.options),
        "alignment": translator.alignment.kwargs(),
        "traced_on": {"cpu_flags": flags, "onednn_isa_cap": onednn.isa_cap()},
    }


def read_export_info(export_dir: str) -> dict:
    """An export's `export_info.json` (`export_info`); {} for an export made before it."""
    file = os.path.join(export_dir, EXPORT_INFO_FILE)
    if not os.path.exists(file):
        return {}
    with open(file) as f:
        return json.load(f)
