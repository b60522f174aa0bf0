"""What the exporter writes and the client sends: signature names, input and output keys,
the sampling inputs' types and defaults, the predict method name, and the one `PredictRequest`
builder both use.

Plain Python at import (TensorFlow and tensorflow-serving-api load inside
`make_predict_request`), so a client that only speaks REST never loads TensorFlow.

    serving_default   text (batch,)                 -> translations, scores (batch,)
    translate_nbest   text (batch,)                 -> translations, scores (batch, n_best)
    translate_sample  text (batch,), temperature (), top_k (), top_p (), seed ()
                                                    -> translations, scores (batch,)
    score             source (batch,), target (batch,) -> log_prob, per_token, score (batch,)
    segment           text (batch,)                 -> segments (batch, max_segments),
                                                       num_segments (batch,)
    translate_markup  text (batch,), inline tags    -> translations, scores, alignments,
                                                       warnings (batch,)
    align             source (batch,), target (batch,) -> alignments (batch,)
    translate_guided  text, prefix, constraints, avoid, glossary (batch,)
                                                    -> translations, scores,
                                                       constraints_met (batch,)
    translate_alternatives  the same inputs         -> the same outputs (batch, k)
                      (the last two only in exports made with --guided)

Every `text` is a whole input (a sentence, a paragraph, a document): the export splits it into
sentences and joins their translations (`keras_transformer.decoding.documents`); `segment`
shows the split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from keras_transformer.checks import check_int
from keras_transformer.constants import GUIDE_KEYS  # noqa: F401  (re-exported)

SERVING_SIGNATURE = "serving_default"  # text (batch,) -> translations, scores (batch,)
NBEST_SIGNATURE = "translate_nbest"  # text (batch,) -> translations, scores (batch, n_best)
SAMPLE_SIGNATURE = "translate_sample"  # text, sampling knobs -> translations, scores (batch,)
SCORE_SIGNATURE = "score"  # source, target (batch,) -> log_prob, per_token, score (batch,)
SEGMENT_SIGNATURE = "segment"  # text (batch,) -> segments (batch, n), num_segments (batch,)
# Tags in, tags out, protected spans verbatim (`decoding.markup_translation`).
MARKUP_SIGNATURE = "translate_markup"  # text -> translations, scores, alignments, warnings
ALIGN_SIGNATURE = "align"  # source, target (batch,) -> alignments (batch,): Moses "i-j"
GUIDED_SIGNATURE = "translate_guided"  # text and guides (batch,) -> (batch,) outputs
ALTERNATIVES_SIGNATURE = "translate_alternatives"  # the same -> (batch, k) outputs
GUIDED_SIGNATURES = (GUIDED_SIGNATURE, ALTERNATIVES_SIGNATURE)
SIGNATURES = (  # every export's; exports made with guided=True add GUIDED_SIGNATURES
    SERVING_SIGNATURE,
    NBEST_SIGNATURE,
    SAMPLE_SIGNATURE,
    SCORE_SIGNATURE,
    SEGMENT_SIGNATURE,
    MARKUP_SIGNATURE,
    ALIGN_SIGNATURE,
)
PAIR_SIGNATURES = (SCORE_SIGNATURE, ALIGN_SIGNATURE)  # take source and target
# An XLA export's `warm_widths` choice -> the signatures its warm-up records send every
# source width (`serving.warmup`): one for each compiled search. `translate_markup` runs
# serving_default's (measured: its first request of a new width compiles nothing after
# serving_default's); `score` and `align` do not search.
WIDTH_SIGNATURES = {
    "all": (SERVING_SIGNATURE, NBEST_SIGNATURE, SAMPLE_SIGNATURE),
    "serving_default": (SERVING_SIGNATURE,),
    "none": (),
}
MARKUP_OUTPUT_KEYS = ("translations", "scores", "alignments", "warnings")
ALIGN_OUTPUT_KEYS = ("alignments",)
INPUT_KEY = "text"
OUTPUT_KEYS = ("translations", "scores")
SCORE_INPUT_KEYS = ("source", "target")
SCORE_OUTPUT_KEYS = ("log_prob", "per_token", "score")
SEGMENT_OUTPUT_KEYS = ("segments", "num_segments")
GUIDED_OUTPUT_KEYS = ("translations", "scores", "constraints_met")
# translate_sample's scalar inputs: name -> (dtype, default). The dtypes are JSON's number
# types, so REST requests (and the test double) need no casts. The defaults (plain sampling
# from the whole distribution, seed 0) are also written into the SignatureDef: TF Serving
# >= 2.14 fills an omitted input from them; older servers and the test double need all five
# inputs, which this module's requests always send.
SAMPLE_INPUTS = {
    "temperature": ("float64", 1.0),  # > 0, divides the logits
    "top_k": ("int64", 0),  # keep the k most likely tokens; 0: off (1: greedy)
    "top_p": ("float64", 1.0),  # keep the nucleus of mass p in (0, 1]; 1: off
    "seed": ("int64", 0),  # the same seed and batch give the same translations
}
SAMPLING_METHODS = ("greedy", "top_k", "top_p", "sample")
PREDICT_METHOD = "tensorflow/serving/predict"


def texts_as_bytes(texts: Sequence[str | bytes]) -> list[bytes]:
    """A batch of `str` (encoded as UTF-8) or `bytes` as a list of `bytes`."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"texts must be a sequence of strings. Received: texts={texts!r}")
    return [t if isinstance(t, bytes) else t.encode("utf-8") for t in texts]


def sampling_inputs(
    method: str = "sample",
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
) -> dict[str, int | float]:
    """`translate_sample`'s scalar inputs for a decoding method of `Translator.sample`:
    "greedy" is top_k 1, "top_k" turns top_p off, "top_p" turns top_k off, "sample" sends
    both as given. A bad value raises a ValueError that names it."""
    if method not in SAMPLING_METHODS:
        raise ValueError(f"method must be one of {SAMPLING_METHODS}. Received: method={method!r}")
    if method == "greedy":
        temperature, top_k, top_p = 1.0, 1, 1.0
    elif method == "top_k":
        top_p = 1.0
    elif method == "top_p":
        top_k = 0
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(
            f"temperature must be > 0 and finite. Received: temperature={temperature!r}"
        )
    if not isinstance(top_k, int) or top_k < (1 if method == "top_k" else 0):
        raise ValueError(f"top_k must be an int >= 1 (0: off). Received: top_k={top_k!r}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1]. Received: top_p={top_p!r}")
    check_int("seed", seed, minimum=None)
    return {"temperature": float(temperature), "top_k": top_k, "top_p": float(top_p), "seed": seed}


def guide_inputs(texts: list[bytes], guides: dict | None) -> dict[str, list[bytes]]:
    """Every `GUIDE_KEYS` input for a batch: `guides` maps a key to one string per text;
    a key not given is "" for all."""
    guides = dict(guides or {})
    unknown = sorted(set(guides) - set(GUIDE_KEYS))
    if unknown:
        raise ValueError(f"guides keys must be among {GUIDE_KEYS}. Received: {unknown}")
    inputs = {}
    for key in GUIDE_KEYS:
        values = texts_as_bytes(guides.get(key, [""] * len(texts)))
        if len(values) != len(texts):
            raise ValueError(f"Got {len(values)} values of {key!r} for {len(texts)} texts.")
        inputs[key] = values
    return inputs


def request_inputs(
    signature: str,
    texts: Sequence[str | bytes],
    targets: Sequence[str | bytes] | None = None,
    sampling: dict | None = None,
    guides: dict | None = None,
) -> dict[str, list[bytes] | int | float]:
    """The named inputs of one request to `signature`, as plain Python values (strings as
    bytes): `text` (plus every sampling input for `translate_sample`, from `sampling`'s
    `sampling_inputs` arguments; every guide input for the guided signatures, from
    `guides`), or `source` = texts and `target` = targets for `PAIR_SIGNATURES`."""
    texts = texts_as_bytes(texts)
    if signature not in GUIDED_SIGNATURES and guides:
        raise ValueError(f"guides go to {GUIDED_SIGNATURES}, not {signature!r}.")
    if signature in PAIR_SIGNATURES:
        if targets is None:
            raise ValueError(f"The {signature!r} signature needs targets.")
        targets = texts_as_bytes(targets)
        if len(targets) != len(texts):
            raise ValueError(f"Got {len(texts)} sources for {len(targets)} targets.")
        return dict(zip(SCORE_INPUT_KEYS, (texts, targets)))
    if targets is not None:
        raise ValueError(f"targets go to {PAIR_SIGNATURES}, not {signature!r}.")
    if signature != SAMPLE_SIGNATURE and sampling:
        raise ValueError(f"sampling goes to {SAMPLE_SIGNATURE!r}, not {signature!r}.")
    inputs: dict = {INPUT_KEY: texts}
    if signature == SAMPLE_SIGNATURE:
        inputs.update(sampling_inputs(**(sampling or {})))
    if signature in GUIDED_SIGNATURES:
        inputs.update(guide_inputs(texts, guides))
    return inputs


def make_predict_request(
    texts: Sequence[str | bytes],
    model_name: str,
    signature: str,
    version: int | None = None,
    targets: Sequence[str | bytes] | None = None,
    sampling: dict | None = None,
    guides: dict | None = None,
):
    """A `tensorflow_serving.apis.predict_pb2.PredictRequest` for the string batch `texts`
    (and `targets`, `sampling`, `guides`: see `request_inputs`), addressed to
    `model_name`/`signature`, pinned to `version` when given. Used by the client and by the
    export's warm-up records."""
    inputs = request_inputs(signature, texts, targets, sampling, guides)
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    for key, value in inputs.items():
        dtype = SAMPLE_INPUTS[key][0] if key in SAMPLE_INPUTS else tf.string
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype))
    return request
