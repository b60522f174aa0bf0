"""Query a TensorFlow Serving model server that serves the exported Transformer.

    outputs = predict_grpc("localhost:8500", ["Hello world"])      # needs tensorflow
    outputs = predict_rest("http://localhost:8501", ["Hello world"])  # standard library only
    # {"translations": [...], "scores": [...]}
    predict_grpc(server, texts, signature="translate_sample",
                 sampling={"method": "top_p", "top_p": 0.9, "seed": 7})
    predict_rest(url, sources, signature="score", targets=targets)  # {"log_prob", ...}

gRPC goes through `PredictionService.Predict` (tensorflow-serving-api); REST posts
`{"signature_name": ..., "inputs": {"text": [...]}}` to `/v1/models/<name>:predict`; requests
to `translate_sample` always carry all four sampling inputs (`signatures.request_inputs`). Both
retry with exponential backoff when the server is UNAVAILABLE (not started yet, restarting) and
never on other errors. Failures raise `ServingError` carrying the status code name
(INVALID_ARGUMENT, DEADLINE_EXCEEDED, ...). Command line: `keras-transformer-client`
(`python export/client.py`) prints it to stderr and exits with status 1.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from keras_transformer.serving.signatures import (
    SERVING_SIGNATURE,
    make_predict_request,
    request_inputs,
)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# HTTP status -> canonical code, as TF Serving's REST API maps them.
HTTP_CODES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL",
    501: "UNIMPLEMENTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}  # fmt: skip


class ServingError(RuntimeError):
    """A failed request: `code` is a canonical status name such as "INVALID_ARGUMENT"."""

    def __init__(self, code: str, details: str, target: str):
        super().__init__(f"{code}: {details} ({target})")
        self.code, self.details, self.target = code, details, target


@dataclass(frozen=True)
class Request:
    """One prediction request's options, shared by `predict_grpc` and `predict_rest`.

    `model_name`, `signature` and `version` (None: the latest) address the model; `targets` go
    to the `score` signature, `sampling` (`signatures.sampling_inputs` arguments) to
    `translate_sample` and `guides` ({"prefix", "constraints", "avoid", "glossary"}: one
    string per text each) to the guided signatures; each try waits up to `timeout` seconds,
    and an UNAVAILABLE server is tried again `retries` times after `backoff`, 2 x `backoff`,
    ... seconds of `sleep`.
    """

    model_name: str = "transformer"
    signature: str = SERVING_SIGNATURE
    version: int | None = None
    targets: Sequence[str | bytes] | None = None
    sampling: dict | None = None
    guides: dict | None = None
    timeout: float = 30.0
    retries: int = 3
    backoff: float = 0.5
    sleep: Callable[[float], None] = time.sleep


def _with_retries(call: Callable, request: Request) -> dict:
    """Run `call()`; on UNAVAILABLE wait backoff, 2*backoff, ... and try again."""
    for attempt in range(request.retries + 1):
        try:
            return call()
        except ServingError as error:
            if error.code != "UNAVAILABLE" or attempt == request.retries:
                raise
            request.sleep(request.backoff * 2**attempt)
    raise AssertionError("unreachable")


def parse_predict_response(response) -> dict[str, list]:
    """`PredictResponse` -> {output name: nested lists}, strings decoded from UTF-8."""
    import numpy as np
    import tensorflow as tf

    decode = np.frompyfunc(lambda b: b.decode("utf-8", "replace"), 1, 1)
    outputs = {}
    for key, proto in response.outputs.items():
        value = tf.make_ndarray(proto)
        if value.dtype == object:
            value = np.asarray(decode(value), dtype=object)
        outputs[key] = value.tolist()
    return outputs


def predict_grpc(
    server: str, texts: Sequence[str | bytes], model_name: str = "transformer",
    signature: str = SERVING_SIGNATURE, **options,
) -> dict[str, list]:  # fmt: skip
    """Predict over gRPC at `server` ("host:port"); returns {"translations": ..., "scores": ...}
    (`score`: {"log_prob", "per_token", "score"}). `options`: the other `Request` fields
    (`targets` go to `score`, `sampling` to `translate_sample`, `version`, `timeout`, ...)."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    ask = Request(model_name, signature, **options)
    request = make_predict_request(
        texts, model_name, signature, ask.version, ask.targets, ask.sampling, ask.guides
    )
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    with grpc.insecure_channel(server, options=options) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        def call():
            try:
                return parse_predict_response(stub.Predict(request, timeout=ask.timeout))
            except grpc.RpcError as error:
                target = f"grpc {server}, model {model_name}, signature {signature}"
                raise ServingError(error.code().name, error.details() or "", target) from error

        return _with_retries(call, ask)


def rest_url(base_url: str, model_name: str, version: int | None = None) -> str:
    model = f"{base_url.rstrip('/')}/v1/models/{model_name}"
    return f"{model}/versions/{version}:predict" if version is not None else f"{model}:predict"


def _rest_error(error: urllib.error.HTTPError, target: str) -> ServingError:
    body = error.read().decode("utf-8", "replace")
    try:
        details = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        details = body or error.reason
    return ServingError(HTTP_CODES.get(error.code, f"HTTP_{error.code}"), details, target)


def predict_rest(
    base_url: str, texts: Sequence[str], model_name: str = "transformer",
    signature: str = SERVING_SIGNATURE, **options,
) -> dict[str, list]:  # fmt: skip
    """Predict over REST at `base_url` ("http://host:8501"), columnar ("inputs") format;
    `options` as for `predict_grpc`."""
    ask = Request(model_name, signature, **options)
    inputs = request_inputs(signature, texts, ask.targets, ask.sampling, ask.guides)
    inputs = {
        key: [b.decode("utf-8", "replace") for b in value] if isinstance(value, list) else value
        for key, value in inputs.items()
    }  # strings as JSON strings, numbers as JSON numbers
    url = rest_url(base_url, model_name, ask.version)
    body = json.dumps({"signature_name": signature, "inputs": inputs}).encode()
    target = f"rest {url}, signature {signature}"

    def call():
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=ask.timeout) as response:
                return json.loads(response.read())["outputs"]
        except urllib.error.HTTPError as error:
            raise _rest_error(error, target) from error
        except OSError as error:  # URLError, refused or reset connections, timeouts
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):
                code, details = "DEADLINE_EXCEEDED", f"no answer within {ask.timeout}s"
            else:
                code, details = "UNAVAILABLE", str(reason)
            raise ServingError(code, details, target) from error

    return _with_retries(call, ask)


def format_results(
    texts, outputs: dict, as_json: bool = False, start: int = 0, targets=None
) -> list[str]:
    """Lines for one batch of results, `texts[i]` being input number `start + i`:

    - 1-best: "score<TAB>translation" per input (a guided search that finds nothing: "",
      score -inf; in JSON, score null);
    - n-best: "input<TAB>rank<TAB>score<TAB>translation" per hypothesis, best first; a
      hypothesis scored -inf (`translate_alternatives` where fewer continuations exist) is
      left out, in lines and JSON alike;
    - scores (`outputs` of `score`, `targets` given): "log_prob<TAB>per_token<TAB>score";
    - alignments of given pairs (`align`): the Moses "i-j" pairs; `translate_markup`:
      "score<TAB>translation<TAB>alignments[<TAB>warning]";
    - `as_json`: one object per input, with its `index`.
    """
    if set(outputs) == {"alignments"}:  # the align signature
        triples = zip(texts, targets, outputs["alignments"])
        rows = [dict(index=start + i, source=s, target=t, alignments=a)
                for i, (s, t, a) in enumerate(triples)]  # fmt: skip
        return [json.dumps(r, ensure_ascii=False) if as_json else r["alignments"] for r in rows]
    if "log_prob" in outputs:
        values = zip(outputs["log_prob"], outputs["per_token"], outputs["score"])
        rows = [dict(index=start + i, source=s, target=t, log_prob=a, per_token=b, score=c)
                for i, (s, t, (a, b, c)) in enumerate(zip(texts, targets, values))]  # fmt: skip
        if as_json:
            return [json.dumps(row, ensure_ascii=False) for row in rows]
        return [f"{r['log_prob']:.4f}\t{r['per_token']:.4f}\t{r['score']:.4f}" for r in rows]
    rows = [dict(index=start + i, source=s, translations=t, scores=c)
            for i, (s, t, c) in enumerate(zip(texts, outputs["translations"],
                                              outputs["scores"]))]  # fmt: skip
    for row in rows:
        if isinstance(row["scores"], (list, tuple)) or getattr(row["scores"], "ndim", 0):
            kept = [(t, float(c)) for t, c in zip(row["translations"], row["scores"])
                    if float(c) != float("-inf")]  # fmt: skip
            row["translations"], row["scores"] = [t for t, _ in kept], [c for _, c in kept]
        elif as_json and float(row["scores"]) == float("-inf"):  # 1-best, nothing found
            row["scores"] = None  # null, not JSON's invalid -Infinity
    for key in ("alignments", "warnings"):  # translate_markup
        for row, value in zip(rows, outputs.get(key, [])):
            row[key] = value
    if as_json:
        return [json.dumps(row, ensure_ascii=False) for row in rows]
    if "alignments" in outputs:
        return [f"{r['scores']:.4f}\t{r['translations']}\t{r['alignments']}"
                + (f"\t{r['warnings']}" if r["warnings"] else "") for r in rows]  # fmt: skip
    lines = []
    for row in rows:
        if isinstance(row["translations"], list):  # n-best: "input rank score translation"
            pairs = zip(row["translations"], row["scores"])
            lines += [f"{row['index']}\t{r}\t{s:.4f}\t{t}" for r, (t, s) in enumerate(pairs)]
        else:
            lines.append(f"{row['scores']:.4f}\t{row['translations']}")
    return lines
