"""TEST DOUBLE of TensorFlow Serving: never ship it, never use it as a server.

It implements the real gRPC `PredictionService.Predict` (tensorflow-serving-api) and a minimal
REST `POST /v1/models/<name>:predict` by loading one SavedModel with `tf.saved_model.load` and
calling the requested signature, so that the client in `keras_transformer.serving.client` can
be tested (and benchmarked) without `tensorflow_model_server`. It checks requests the way TF
Serving does and answers bad ones with the same status codes (unknown model: NOT_FOUND;
unknown signature, missing or extra input, wrong dtype or rank: INVALID_ARGUMENT), but it has
no batching, version management, warm-up or performance. Both servers bind to 127.0.0.1 on an
ephemeral port and run in daemon threads.

    service = SavedModelPredictionService(export_dir, model_name="transformer")
    server, port = serve_grpc(service)    # ... server.stop(0)
    httpd, port = serve_rest(service)     # ... httpd.shutdown()
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the export uses)
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_transformer.serving.signatures import SERVING_SIGNATURE

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400, grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504, grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.INTERNAL: 500,
}  # fmt: skip
REST_PATH = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?:predict$")


class RequestError(Exception):
    """A request the real server would reject with `code`."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


class SavedModelPredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    """Serves the signatures of the SavedModel at `export_dir` under `model_name`.

    Args:
        export_dir: a version directory `.../<model_name>/<version>`.
        model_name: the name requests must use.
        delay_s: sleep this long before each prediction (to provoke client deadlines).
    """

    def __init__(self, export_dir: str, model_name: str = "transformer", delay_s: float = 0.0):
        self.loaded = tf.saved_model.load(export_dir)
        self.model_name = model_name
        base = os.path.basename(os.path.normpath(export_dir))
        self.version = int(base) if base.isdigit() else 1
        self.delay_s = delay_s
        self.requests = 0
        self._lock = threading.Lock()

    def run(self, model_name: str, signature_name: str, inputs: dict, version=None) -> dict:
        """Check and run one request: {input: np.ndarray} -> {output: np.ndarray}."""
        function, tensors = self.check(model_name, signature_name, inputs, version)
        return self.call(function, tensors)

    def call(self, function, tensors: dict) -> dict:
        """Run a checked request (`check`): {output: np.ndarray}."""
        time.sleep(self.delay_s)
        try:
            outputs = function(**tensors)
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as error:
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from error
        return {key: value.numpy() for key, value in outputs.items()}

    def check(self, model_name: str, signature_name: str, inputs: dict, version=None):
        """`(signature function, {input: tf.Tensor})` of a request, else `RequestError`."""
        with self._lock:
            self.requests += 1
        if model_name != self.model_name or version not in (None, self.version):
            target = model_name if version is None else f"{model_name} version {version}"
            raise RequestError(grpc.StatusCode.NOT_FOUND, f"Servable not found: {target}")
        name = signature_name or SERVING_SIGNATURE
        if name not in self.loaded.signatures:
            raise RequestError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f'Serving signature name: "{name}" not found in signature def',
            )
        function = self.loaded.signatures[name]
        specs = function.structured_input_signature[1]  # {name: TensorSpec}
        extra, missing = sorted(set(inputs) - set(specs)), sorted(set(specs) - set(inputs))
        if extra or missing:
            raise RequestError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"input size does not match signature: Sent extra: {extra}. "
                f"Missing but required: {missing}.",
            )
        return function, {key: _to_tensor(key, value, specs[key]) for key, value in inputs.items()}

    def Predict(self, request, context):  # noqa: N802  (the gRPC method name)
        spec = request.model_spec
        version = spec.version.value if spec.HasField("version") else None
        try:
            inputs = {key: tf.make_ndarray(proto) for key, proto in request.inputs.items()}
            outputs = self.run(spec.name, spec.signature_name, inputs, version)
        except RequestError as error:
            context.abort(error.code, error.message)
        response = predict_pb2.PredictResponse()
        response.model_spec.name = self.model_name
        response.model_spec.version.value = self.version
        response.model_spec.signature_name = spec.signature_name or SERVING_SIGNATURE
        for key, value in outputs.items():
            if not request.output_filter or key in request.output_filter:
                response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
        return response


class BatchingPredictionService(SavedModelPredictionService):
    """The double with an emulation of TF Serving's `--enable_batching` (BasicBatchScheduler,
    one queue per signature), to measure what server-side batching does to our signatures
    under concurrent load (`serving.load`). What it copies from TF Serving: a request whose
    input has no batch dimension, or whose inputs differ in it, is refused with TF Serving's
    message ("Batching session Run() input tensors must have at least one dimension"); an
    error in a merged call fails every request merged into it; requests queue until
    `max_batch_size` rows or `batch_timeout_micros` after the first; `num_batch_threads` batches
    run at once; each request gets its own rows back. What it does not copy: allowed batch
    sizes and padding, large-batch splitting (a request over `max_batch_size` runs alone),
    `max_enqueued_batches` (no request is refused for a full queue), the C++ speed of it all.

    Args:
        export_dir, model_name: as `SavedModelPredictionService`.
        max_batch_size: rows of one merged call at most.
        batch_timeout_micros: how long the first request of a batch waits for others.
        num_batch_threads: merged calls run at once.
    """

    def __init__(
        self,
        export_dir: str,
        model_name: str = "transformer",
        max_batch_size: int = 128,
        batch_timeout_micros: int = 5000,
        num_batch_threads: int = 2,
    ):
        super().__init__(export_dir, model_name)
        self.max_batch_size = max_batch_size
        self.timeout_s = batch_timeout_micros / 1e6
        self._queues: dict[str, list] = {}
        self._ready = threading.Condition()
        self.batch_rows: list[int] = []  # rows of each merged call, for the report
        for _ in range(num_batch_threads):
            threading.Thread(target=self._run_batches, daemon=True).start()

    def run(self, model_name, signature_name, inputs, version=None):
        for key, value in inputs.items():
            if np.ndim(value) == 0:
                raise RequestError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "Batching session Run() input tensors must have at least one dimension "
                    f"(input {key!r} is a scalar)",
                )
        function, tensors = self.check(model_name, signature_name, inputs, version)
        rows = {int(tensor.shape[0]) for tensor in tensors.values()}
        if len(rows) > 1:
            raise RequestError(
                grpc.StatusCode.INVALID_ARGUMENT,
                "Batching session Run() input tensors must have equal 0th-dimension size",
            )
        if rows.pop() > self.max_batch_size:
            return self.call(function, tensors)
        task = {"function": function, "tensors": tensors, "done": threading.Event()}
        with self._ready:
            self._queues.setdefault(signature_name or SERVING_SIGNATURE, []).append(task)
            self._ready.notify()
        task["done"].wait()
        if "error" in task:
            raise task["error"]
        return task["outputs"]

    def _take_batch(self) -> list:
        """Wait for a queue with work; then up to `timeout_s` for `max_batch_size` rows."""
        with self._ready:
            while not any(self._queues.values()):
                self._ready.wait()
            name = next(name for name, queue in self._queues.items() if queue)
            deadline = time.monotonic() + self.timeout_s
            while time.monotonic() < deadline and self._rows(name) < self.max_batch_size:
                self._ready.wait(deadline - time.monotonic())
            queue, batch, rows = self._queues[name], [], 0
            while queue and rows + self._rows_of(queue[0]) <= self.max_batch_size:
                rows += self._rows_of(queue[0])
                batch.append(queue.pop(0))
            return batch

    def _rows(self, name: str) -> int:
        return sum(self._rows_of(task) for task in self._queues[name])

    @staticmethod
    def _rows_of(task) -> int:
        return int(next(iter(task["tensors"].values())).shape[0])

    def _run_batches(self) -> None:
        while True:
            batch = self._take_batch()
            keys = batch[0]["tensors"].keys()
            merged = {key: tf.concat([task["tensors"][key] for task in batch], 0) for key in keys}
            self.batch_rows.append(sum(self._rows_of(task) for task in batch))
            try:
                outputs = self.call(batch[0]["function"], merged)
            except RequestError as error:  # one bad request fails its whole batch, as in TF
                for task in batch:
                    task["error"] = error
                    task["done"].set()
                continue
            start = 0
            for task in batch:
                end = start + self._rows_of(task)
                task["outputs"] = {key: value[start:end] for key, value in outputs.items()}
                task["done"].set()
                start = end


def _to_tensor(key: str, value: np.ndarray, spec: tf.TensorSpec) -> tf.Tensor:
    is_string = value.dtype == object or value.dtype.kind in "SU"
    if is_string != (spec.dtype == tf.string) or (
        not is_string and tf.as_dtype(value.dtype) != spec.dtype
    ):
        got = "string" if is_string else tf.as_dtype(value.dtype).name
        raise RequestError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Expects arg {key!r} to be {spec.dtype.name} but {got} is provided",
        )
    if not spec.shape.is_compatible_with(value.shape):
        raise RequestError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Input {key!r} must have shape {spec.shape}. Received: {list(value.shape)}",
        )
    return tf.constant(value, dtype=spec.dtype)


def serve_grpc(service: SavedModelPredictionService, max_workers: int = 2, port: int = 0):
    """Start a gRPC server on 127.0.0.1 (`port`, 0: an ephemeral one): returns
    `(server, port)`."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(service, server)
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, port


def _rest_handler(service: SavedModelPredictionService):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802  (http.server's method name)
            try:
                status, payload = 200, self._predict()
            except RequestError as error:
                status, payload = HTTP_STATUS.get(error.code, 500), {"error": error.message}
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its deadline passed)

        def _predict(self) -> dict:
            match = REST_PATH.match(self.path)
            if not match:
                raise RequestError(grpc.StatusCode.NOT_FOUND, f"Malformed request: {self.path}")
            version = int(match.group(2)) if match.group(2) else None
            try:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                inputs, columnar = _rest_inputs(request)
            except (ValueError, KeyError, TypeError) as error:
                raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from error
            signature = request.get("signature_name", SERVING_SIGNATURE)
            outputs = service.run(match.group(1), signature, inputs, version)
            outputs = {key: _jsonable(value) for key, value in outputs.items()}
            if columnar:
                return {"outputs": outputs}
            rows = zip(*outputs.values())
            return {"predictions": [dict(zip(outputs, row)) for row in rows]}

        def log_message(self, *args):  # keep test output quiet
            pass

    return Handler


def _rest_inputs(request: dict) -> tuple[dict, bool]:
    """{"inputs": {name: values}} (columnar) or {"instances": [{name: value}, ...]} (rows)."""
    if "inputs" in request:
        inputs, columnar = request["inputs"], True
    else:
        rows, columnar = request["instances"], False
        inputs = {key: [row[key] for row in rows] for key in rows[0]} if rows else {}
    if not isinstance(inputs, dict):
        raise TypeError(f"Expected named inputs. Received: {type(inputs).__name__}")
    return {key: _from_json(values) for key, values in inputs.items()}, columnar


def _from_json(values) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind == "U":
        array = np.vectorize(lambda s: s.encode("utf-8"), otypes=[object])(array)
    return array


def _jsonable(value: np.ndarray):
    if value.dtype == object:
        return np.frompyfunc(lambda b: b.decode("utf-8", "replace"), 1, 1)(value).tolist()
    return value.tolist()


def serve_rest(service: SavedModelPredictionService):
    """Start a REST server on 127.0.0.1 with an ephemeral port: returns `(httpd, port)`."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _rest_handler(service))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1})
    thread.daemon = True
    thread.start()
    return httpd, httpd.server_address[1]


def main(argv=None) -> int:
    """`python -m keras_transformer.testing.serving_double --export-dir DIR`: serve gRPC on
    127.0.0.1 in this process until killed; prints "port N" once ready (load tests)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--export-dir", required=True, help="a version directory")
    parser.add_argument("--model-name", default="transformer")
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port")
    parser.add_argument("--threads", type=int, default=32, help="gRPC worker threads")
    parser.add_argument(
        "--batching", metavar="MAX_BATCH,TIMEOUT_US,THREADS",
        help="emulate --enable_batching with these batching.config values",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.batching:
        size, timeout, threads = (int(x) for x in args.batching.split(","))
        service = BatchingPredictionService(
            args.export_dir, args.model_name, size, timeout, threads
        )
    else:
        service = SavedModelPredictionService(args.export_dir, args.model_name)
    server, port = serve_grpc(service, max_workers=args.threads, port=args.port)
    print(f"port {port}", flush=True)
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
