"""Serving under load: concurrent gRPC clients send a mix of requests to a PredictionService
for a fixed time; the report gives sentences per second, latency percentiles, failures and
the server's memory over the run (`benchmarks/serving_benchmark.py --load`, and a slow test).

The mix (`MIX`, weights): short sentence batches, whole documents, n-best, sampling, score,
and hostile requests that a server must answer with INVALID_ARGUMENT (an input over the
export's byte limit, a non-string text, a 2-D text, a sampling temperature of 0, score with
more targets than sources). A hostile request that gets anything else counts as a failure,
as does any error on the others.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import threading
import time
from collections.abc import Callable, Sequence

from keras_transformer.serving.signatures import (
    NBEST_SIGNATURE,
    SAMPLE_SIGNATURE,
    SCORE_SIGNATURE,
    SERVING_SIGNATURE,
    make_predict_request,
)

MIX = {"sentences": 40, "document": 20, "nbest": 10, "sample": 10, "score": 10, "hostile": 10}
HOSTILE = ("oversized", "int_text", "rank_2_text", "zero_temperature", "score_batch_mismatch")


@dataclasses.dataclass
class Request:
    """One request of the mix: its kind, the proto, the sentences it holds, and whether it
    must fail with INVALID_ARGUMENT."""

    kind: str
    proto: object
    sentences: int
    hostile: bool = False


def mixed_requests(
    sentences: Sequence[str], model_name: str = "transformer", mix: dict[str, int] = MIX,
    max_input_bytes: int = 100_000, without: Sequence[str] = (),
) -> Callable[[random.Random], Request]:  # fmt: skip
    """A function drawing one request of `mix` (kinds in `without` left out) from `sentences`
    with the given `random.Random`."""
    kinds = [kind for kind in mix if kind not in without]
    weights = [mix[kind] for kind in kinds]

    def draw(rng: random.Random) -> Request:
        kind = rng.choices(kinds, weights)[0]
        start = rng.randrange(len(sentences))
        take = lambda n: [sentences[(start + i) % len(sentences)] for i in range(n)]  # noqa: E731
        if kind == "sentences":
            texts = take(rng.randint(1, 4))
            return Request(kind, _request(texts, model_name, SERVING_SIGNATURE), len(texts))
        if kind == "document":
            lines = take(rng.randint(2, 8))
            proto = _request([" ".join(lines)], model_name, SERVING_SIGNATURE)
            return Request(kind, proto, len(lines))
        if kind == "nbest":
            texts = take(rng.randint(1, 2))
            return Request(kind, _request(texts, model_name, NBEST_SIGNATURE), len(texts))
        if kind == "sample":
            texts = take(rng.randint(1, 4))
            sampling = {"temperature": 0.8, "top_k": 10, "seed": rng.randrange(1000)}
            proto = _request(texts, model_name, SAMPLE_SIGNATURE, sampling=sampling)
            return Request(kind, proto, len(texts))
        if kind == "score":
            texts = take(rng.randint(1, 4))
            proto = _request(texts, model_name, SCORE_SIGNATURE, targets=texts[::-1])
            return Request(kind, proto, len(texts))
        return _hostile(rng.choice(HOSTILE), take(2), model_name, max_input_bytes)

    draw.kinds = [kind for kind in kinds if kind != "hostile"] + [
        f"hostile:{name}" for name in HOSTILE if "hostile" in kinds
    ]
    return draw


def _request(texts, model_name, signature, targets=None, sampling=None):
    return make_predict_request(texts, model_name, signature, None, targets, sampling)


def _hostile(name: str, texts: list[str], model_name: str, max_input_bytes: int) -> Request:
    import tensorflow as tf

    if name == "oversized":
        proto = _request(["x" * (max_input_bytes + 1)], model_name, SERVING_SIGNATURE)
    elif name == "zero_temperature":  # the client refuses to build it: edit the proto
        proto = _request(texts, model_name, SAMPLE_SIGNATURE, sampling={})
        proto.inputs["temperature"].CopyFrom(tf.make_tensor_proto(0.0, tf.float64))
    elif name == "score_batch_mismatch":  # the client refuses to build it: edit the proto
        proto = _request(texts, model_name, SCORE_SIGNATURE, targets=texts)
        targets = [t.encode() for t in texts + texts]
        proto.inputs["target"].CopyFrom(tf.make_tensor_proto(targets, tf.string))
    else:
        proto = _request(texts, model_name, SERVING_SIGNATURE)
        value = [[1, 2]] if name == "int_text" else [[t.encode() for t in texts]]
        dtype = tf.int32 if name == "int_text" else tf.string
        proto.inputs["text"].CopyFrom(tf.make_tensor_proto(value, dtype))
    return Request(f"hostile:{name}", proto, 0, hostile=True)


def start_server(export_dir: str, batching: str | None = None, threads: int = 32):
    """The gRPC test double (`testing.serving_double`) in its own process, so that its memory
    is its own: returns `(process, "127.0.0.1:PORT")`. `batching`: "MAX_BATCH,TIMEOUT_US,
    THREADS" to emulate TF Serving's `--enable_batching`."""
    import subprocess
    import sys

    command = [
        sys.executable, "-m", "keras_transformer.testing.serving_double", "--export-dir",
        export_dir, "--threads", str(threads), *(["--batching", batching] if batching else []),
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    if not line.startswith("port "):
        process.kill()
        raise RuntimeError(f"the serving double did not start (said {line!r})")
    return process, f"127.0.0.1:{int(line.split()[1])}"


def rss_mb(pid: int) -> float:
    """Resident memory of process `pid` in MB (Linux `/proc`)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for pid={pid}")


def run_load(
    address: str,
    draw: Callable[[random.Random], Request],
    clients: int = 32,
    seconds: float = 60.0,
    server_pid: int | None = None,
    timeout: float = 300.0,
    seed: int = 0,
) -> dict:
    """`clients` threads, each with its own gRPC channel, send `draw`n requests back to back
    to `address` for `seconds`; returns `summarize`'s report (memory sampled every second
    from `server_pid` if given)."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    records, memory, lock = [], [], threading.Lock()
    start = time.monotonic()
    deadline = start + seconds

    def client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        with grpc.insecure_channel(address) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            while time.monotonic() < deadline:
                request = draw(rng)
                began = time.monotonic()
                try:
                    stub.Predict(request.proto, timeout=timeout)
                    code = "OK"
                except grpc.RpcError as error:
                    code = error.code().name
                except Exception as error:  # noqa: BLE001  (reported, never lost in a thread)
                    code = f"CLIENT:{type(error).__name__}"
                ended = time.monotonic()
                with lock:
                    records.append((request, code, began - start, ended - began))

    def sample_memory() -> None:
        while time.monotonic() < deadline:
            memory.append((time.monotonic() - start, rss_mb(server_pid)))
            time.sleep(1.0)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    if server_pid is not None:
        threads.append(threading.Thread(target=sample_memory, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if server_pid is not None:
        memory.append((time.monotonic() - start, rss_mb(server_pid)))
    return summarize(records, memory, time.monotonic() - start, clients)


def warm_up(address: str, draw: Callable[[random.Random], Request], seed: int = 0) -> list:
    """Send requests one at a time until every kind of the mix has been sent twice: the
    first call of each signature pays for TensorFlow's graph optimization (TF Serving replays
    the export's warm-up records for that; the test double does not). Returns the kinds."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    rng, sent, kinds = random.Random(seed), {}, []
    with grpc.insecure_channel(address) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        for _ in range(1000):
            request = draw(rng)
            if sent.get(request.kind, 0) >= 2:
                continue
            try:
                stub.Predict(request.proto, timeout=600)
            except grpc.RpcError:
                pass  # hostile ones fail, as they should
            sent[request.kind] = sent.get(request.kind, 0) + 1
            kinds.append(request.kind)
            if len(sent) >= len(_kinds_of(draw)) and min(sent.values()) >= 2:
                break
    return kinds


def _kinds_of(draw) -> set:
    return set(getattr(draw, "kinds", ()))


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(records: list, memory: list, elapsed: float, clients: int) -> dict:
    """The load report: requests, failures, sentences/s, latency p50/p99 (overall and per
    kind, hostile requests apart), and memory at the start and end (means of the first and
    last ten seconds)."""
    served = [r for r in records if not r[0].hostile]
    hostile = [r for r in records if r[0].hostile]
    failed = [r for r in served if r[1] != "OK"]
    wrongly = [r for r in hostile if r[1] != "INVALID_ARGUMENT"]
    latencies = [r[3] for r in served if r[1] == "OK"]
    translated = sum(r[0].sentences for r in served if r[1] == "OK")
    report = {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": len(records),
        "failed": len(failed),
        "failed_codes": sorted({f"{r[0].kind}:{r[1]}" for r in failed}),
        "hostile": len(hostile),
        "hostile_invalid_argument": len(hostile) - len(wrongly),
        "hostile_other": sorted({f"{r[0].kind}:{r[1]}" for r in wrongly}),
        "sentences_per_sec": round(translated / elapsed, 1),
        "p50_ms": _ms(_percentile(latencies, 0.5)),
        "p99_ms": _ms(_percentile(latencies, 0.99)),
        "by_kind": {},
    }
    for kind in sorted({r[0].kind for r in served}):
        times = [r[3] for r in served if r[0].kind == kind and r[1] == "OK"]
        report["by_kind"][kind] = {
            "requests": len(times), "p50_ms": _ms(_percentile(times, 0.5)),
            "p99_ms": _ms(_percentile(times, 0.99)),
        }  # fmt: skip
    if memory:
        first = [mb for t, mb in memory if t <= 10.0] or [memory[0][1]]
        last = [mb for t, mb in memory if t >= memory[-1][0] - 10.0]
        report["memory_mb"] = {
            "first_10s": round(statistics.mean(first), 1),
            "last_10s": round(statistics.mean(last), 1),
            "growth": round(statistics.mean(last) / statistics.mean(first) - 1.0, 4),
            "max": round(max(mb for _, mb in memory), 1),
        }
    return report


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 1)
