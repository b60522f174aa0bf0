"""Tests for keras_transformer.serving.client and its command line against the test double in
keras_transformer.testing.serving_double (gRPC and REST on 127.0.0.1, ephemeral ports): round
trips, status codes, deadlines and retries."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import prediction_service_pb2_grpc

from keras_transformer import SearchOptions
from keras_transformer.cli import client as client_cli
from keras_transformer.serving import client
from keras_transformer.serving.export import export_savedmodel
from keras_transformer.testing.model_dir import make_model_dir
from keras_transformer.testing.serving_double import (
    SavedModelPredictionService,
    serve_grpc,
    serve_rest,
)

ROOT = Path(__file__).resolve().parents[1]
MODEL = "transformer"
N_BEST = 2
TEXTS = ["The cat sleeps number 1.", "Der Hund schläft.", ""]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    model_dir = make_model_dir(str(tmp_path_factory.mktemp("client_model")))
    base = str(tmp_path_factory.mktemp("serving"))
    export_dir = export_savedmodel(
        model_dir, base, MODEL, search=SearchOptions(beam_size=2), n_best=N_BEST, check_ops=False
    )  # (test_export checks ops)
    return SavedModelPredictionService(export_dir, model_name=MODEL)


@pytest.fixture(scope="module")
def grpc_address(service):
    server, port = serve_grpc(service)
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)


@pytest.fixture(scope="module")
def rest_url(service):
    httpd, port = serve_rest(service)
    yield f"http://127.0.0.1:{port}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def slow_service(service):
    service.delay_s = 1.0
    yield service
    service.delay_s = 0.0


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _direct(service, signature="serving_default", texts=TEXTS) -> dict:
    out = service.loaded.signatures[signature](text=tf.constant(texts))
    strings = out["translations"].numpy().astype(object)
    decode = [b.decode() for b in strings.reshape(-1)]
    translations = decode if strings.ndim == 1 else [decode[i : i + N_BEST] for i in
                                                      range(0, len(decode), N_BEST)]  # fmt: skip
    return {"translations": translations, "scores": out["scores"].numpy().tolist()}


def _assert_same(got: dict, want: dict):
    assert got["translations"] == want["translations"]
    flat = tf.reshape(want["scores"], [-1]).numpy().tolist()
    assert tf.reshape(got["scores"], [-1]).numpy().tolist() == pytest.approx(flat, abs=1e-5)


def test_grpc_round_trip(service, grpc_address):
    _assert_same(client.predict_grpc(grpc_address, TEXTS, MODEL), _direct(service))


def test_grpc_n_best_and_version(service, grpc_address):
    got = client.predict_grpc(grpc_address, TEXTS, MODEL, "translate_nbest", version=1)
    _assert_same(got, _direct(service, "translate_nbest"))
    assert [len(row) for row in got["translations"]] == [N_BEST] * len(TEXTS)


def test_rest_round_trip(service, rest_url):
    _assert_same(client.predict_rest(rest_url, TEXTS, MODEL), _direct(service))
    got = client.predict_rest(rest_url, TEXTS, MODEL, "translate_nbest", version=1)
    _assert_same(got, _direct(service, "translate_nbest"))


def test_cli_prints_one_line_per_input(service, grpc_address, capsys, monkeypatch):
    assert client_cli.main(["--server", grpc_address, "--model", MODEL, *TEXTS[:2]]) == 0
    want = _direct(service, texts=TEXTS[:2])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t", 1)[1] for line in lines] == want["translations"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(TEXTS[:2]) + "\n"))
    assert client_cli.main(["--server", grpc_address, "--n-best", "--batch-size", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 * N_BEST and lines[0].startswith("0\t0\t")


def test_cli_rest_json_output(rest_url, capsys):
    assert client_cli.main(["--rest", rest_url, "--json", "Hello world"]) == 0
    assert '"source": "Hello world"' in capsys.readouterr().out


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_unknown_signature_is_invalid_argument_and_not_retried(
    service, grpc_address, rest_url, transport
):
    before = service.requests
    with pytest.raises(client.ServingError) as info:
        if transport == "grpc":
            client.predict_grpc(grpc_address, TEXTS, MODEL, "no_such_signature")
        else:
            client.predict_rest(rest_url, TEXTS, MODEL, "no_such_signature")
    assert info.value.code == "INVALID_ARGUMENT"
    assert "no_such_signature" in info.value.details
    assert service.requests == before + 1


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_unknown_model_or_version_is_not_found(grpc_address, rest_url, transport):
    predict = client.predict_grpc if transport == "grpc" else client.predict_rest
    where = grpc_address if transport == "grpc" else rest_url
    for model, version in (("other_model", None), (MODEL, 2)):
        with pytest.raises(client.ServingError, match="NOT_FOUND"):
            predict(where, TEXTS, model, version=version)


def test_cli_wrong_signature_exits_nonzero_with_message(grpc_address):
    run = subprocess.run(
        [sys.executable, str(ROOT / "export" / "client.py"), "--server", grpc_address,
         "--signature", "no_such_signature", "--retries", "0", "Hello"],
        capture_output=True, text=True, timeout=120, check=False,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )  # fmt: skip
    assert run.returncode == 1
    assert run.stdout == ""
    error_lines = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert len(error_lines) == 1, run.stderr
    assert "INVALID_ARGUMENT" in error_lines[0] and "no_such_signature" in error_lines[0]


@pytest.mark.parametrize(
    "inputs",
    [
        {},  # missing "text"
        {"text": tf.make_tensor_proto([b"a"]), "extra": tf.make_tensor_proto([1])},
        {"text": tf.make_tensor_proto([1, 2], dtype=tf.int32)},  # wrong dtype
        {"text": tf.make_tensor_proto([[b"a"]])},  # wrong rank
    ],
    ids=["missing", "extra", "dtype", "rank"],
)
def test_double_rejects_malformed_requests(grpc_address, inputs):
    request = client.make_predict_request(["a"], MODEL, "serving_default")
    request.inputs.clear()
    for key, proto in inputs.items():
        request.inputs[key].CopyFrom(proto)
    with grpc.insecure_channel(grpc_address) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_deadline_exceeded(slow_service, grpc_address, rest_url, transport, capsys):
    where = ["--server", grpc_address] if transport == "grpc" else ["--rest", rest_url]
    before = slow_service.requests
    assert client_cli.main([*where, "--timeout", "0.2", "Hello"]) == 1
    assert "error: DEADLINE_EXCEEDED" in capsys.readouterr().err
    assert slow_service.requests == before + 1  # not retried


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_unavailable_is_retried_with_exponential_backoff(transport):
    port, sleeps = _closed_port(), []
    predict = client.predict_grpc if transport == "grpc" else client.predict_rest
    where = f"127.0.0.1:{port}" if transport == "grpc" else f"http://127.0.0.1:{port}"
    with pytest.raises(client.ServingError) as info:
        predict(where, TEXTS, timeout=5, retries=2, backoff=0.1, sleep=sleeps.append)
    assert info.value.code == "UNAVAILABLE"
    assert sleeps == pytest.approx([0.1, 0.2])


def test_texts_must_be_a_sequence():
    with pytest.raises(TypeError, match="sequence of strings"):
        client.make_predict_request("Hello", MODEL, "serving_default")


def test_rest_double_accepts_row_format(service, rest_url):
    body = {"signature_name": "serving_default", "instances": [{"text": t} for t in TEXTS]}
    request = urllib.request.Request(
        client.rest_url(rest_url, MODEL), data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        predictions = json.loads(response.read())["predictions"]
    want = _direct(service)
    assert [p["translations"] for p in predictions] == want["translations"]
    assert [p["scores"] for p in predictions] == pytest.approx(want["scores"], abs=1e-5)
