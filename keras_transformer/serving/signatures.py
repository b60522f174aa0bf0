"""What the exporter writes and the client sends: signature names, input and output keys,
the predict method name, and the one `PredictRequest` builder both use.

Plain Python at import (TensorFlow and tensorflow-serving-api load inside
`make_predict_request`), so a client that only speaks REST never loads TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence

SERVING_SIGNATURE = "serving_default"  # text (batch,) -> translations, scores (batch,)
NBEST_SIGNATURE = "translate_nbest"  # text (batch,) -> translations, scores (batch, n_best)
SIGNATURES = (SERVING_SIGNATURE, NBEST_SIGNATURE)
INPUT_KEY = "text"
OUTPUT_KEYS = ("translations", "scores")
PREDICT_METHOD = "tensorflow/serving/predict"


def texts_as_bytes(texts: Sequence[str | bytes]) -> list[bytes]:
    """A batch of `str` (encoded as UTF-8) or `bytes` as a list of `bytes`."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"texts must be a sequence of strings. Received: texts={texts!r}")
    return [t if isinstance(t, bytes) else t.encode("utf-8") for t in texts]


def make_predict_request(
    texts: Sequence[str | bytes], model_name: str, signature: str, version: int | None = None
):
    """A `tensorflow_serving.apis.predict_pb2.PredictRequest` for the string batch `texts`
    (input `INPUT_KEY`, shape `(batch,)`), addressed to `model_name`/`signature`, pinned to
    `version` when given. Used by the client and by the export's warm-up records."""
    values = texts_as_bytes(texts)
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    request.inputs[INPUT_KEY].CopyFrom(tf.make_tensor_proto(values, tf.string))
    return request
