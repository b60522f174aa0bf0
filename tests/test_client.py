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

from keras_transformer.cli import client as client_cli
from keras_transformer.serving import client
from keras_transformer.testing.serving_double import (
    serve_grpc,
    serve_rest,
)

ROOT = Path(__file__).resolve().parents[1]
MODEL = "transformer"
N_BEST = 2
TEXTS = ["The cat sleeps number 1.", "Der Hund schläft.", ""]


@pytest.fixture(scope="module")
def service(serving_service):
    """conftest's test double over its export: model MODEL, n-best N_BEST."""
    assert serving_service.model_name == MODEL
    return serving_service


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


def test_paragraph_over_grpc_and_rest_is_its_sentences_one_by_one(service, grpc_address, rest_url):
    paragraph = "The cat sleeps number 1. Der Hund schläft.\n\n  Le chat dort number 7. Ok!"
    sentences = ["The cat sleeps number 1.", "Der Hund schläft.", "Le chat dort number 7.", "Ok!"]
    alone = [_direct(service, texts=[s])["translations"][0] for s in sentences]
    want = f"{alone[0]} {alone[1]}\n\n  {alone[2]} {alone[3]}"
    for got in (
        client.predict_grpc(grpc_address, [paragraph], MODEL),
        client.predict_rest(rest_url, [paragraph], MODEL),
    ):
        assert got["translations"] == [want]


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


def test_cli_n_best_numbers_inputs_across_batches(service, grpc_address, capsys, monkeypatch):
    want = _direct(service, "translate_nbest")
    expected = [
        f"{i}\t{rank}\t{score:.4f}\t{text}"
        for i, (texts, scores) in enumerate(zip(want["translations"], want["scores"]))
        for rank, (text, score) in enumerate(zip(texts, scores))
    ]
    for batch_size in ("1", "2"):
        monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(TEXTS) + "\n"))
        argv = ["--server", grpc_address, "--n-best", "--batch-size", batch_size]
        assert client_cli.main(argv) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [line.split("\t")[:2] for line in lines] == [e.split("\t")[:2] for e in expected]
        assert [line.split("\t")[3] for line in lines] == [e.split("\t")[3] for e in expected]
    assert client_cli.main(["--server", grpc_address, "--json", "--batch-size", "1", *TEXTS]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["index"] for row in rows] == list(range(len(TEXTS)))


def _direct_sample(service, texts, **knobs) -> dict:
    from keras_transformer.serving.signatures import SAMPLE_INPUTS, sampling_inputs

    values = sampling_inputs(**knobs)
    inputs = {key: tf.constant(values[key], dtype) for key, (dtype, _) in SAMPLE_INPUTS.items()}
    out = service.loaded.signatures["translate_sample"](text=tf.constant(texts), **inputs)
    return {
        "translations": [b.decode() for b in out["translations"].numpy()],
        "scores": out["scores"].numpy().tolist(),
    }


def test_sampling_over_grpc_and_rest_sends_every_input(service, grpc_address, rest_url):
    knobs = {"method": "top_k", "top_k": 5, "temperature": 1.2, "seed": 4}
    want = _direct_sample(service, TEXTS, **knobs)
    for predict, where in ((client.predict_grpc, grpc_address), (client.predict_rest, rest_url)):
        got = predict(where, TEXTS, MODEL, "translate_sample", sampling=knobs)
        _assert_same(got, want)
    again = client.predict_grpc(grpc_address, TEXTS, MODEL, "translate_sample", sampling=knobs)
    _assert_same(again, want)  # same seed, same output
    others = [
        client.predict_rest(
            rest_url, TEXTS, MODEL, "translate_sample", sampling={**knobs, "seed": s}
        )
        for s in (5, 6)
    ]
    assert any(other["translations"] != want["translations"] for other in others)


def test_cli_sampling_flags_reach_the_signature(service, grpc_address, capsys):
    argv = ["--server", grpc_address, "--sampling", "topp", "--top-p", "0.8",
            "--temperature", "1.5", "--seed", "9", "--batch-size", "2", *TEXTS[:2]]  # fmt: skip
    assert client_cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    want = _direct_sample(service, TEXTS[:2], method="top_p", top_p=0.8, temperature=1.5, seed=9)
    assert [line.split("\t", 1)[1] for line in lines] == want["translations"]
    assert client_cli.main(["--sampling", "topk", "--top-k", "0", "Hi"]) == 2
    assert "top_k" in capsys.readouterr().err


SOURCES, TARGETS = ["The cat sleeps.", "", "Der Hund"], ["Die Katze schläft.", "Le chat", ""]


def _direct_score(service) -> list[str]:
    out = service.loaded.signatures["score"](
        source=tf.constant(SOURCES), target=tf.constant(TARGETS)
    )
    values = zip(*(out[key].numpy().tolist() for key in ("log_prob", "per_token", "score")))
    return [f"{a:.4f}\t{b:.4f}\t{c:.4f}" for a, b, c in values]


def test_score_over_grpc_and_rest_through_the_client(service, grpc_address, rest_url, capsys):
    pairs = "".join(f"{s}\t{t}\n" for s, t in zip(SOURCES, TARGETS))
    run = subprocess.run(
        [sys.executable, str(ROOT / "export" / "client.py"), "--rest", rest_url, "--score",
         "--batch-size", "2"],
        input=pairs, capture_output=True, text=True, timeout=120, check=False,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    want = _direct_score(service)
    assert run.stdout.splitlines() == want
    argv = ["--server", grpc_address, "--score", *[f"{s}\t{t}" for s, t in zip(SOURCES, TARGETS)]]
    assert client_cli.main(argv) == 0
    assert capsys.readouterr().out.splitlines() == want
    got = client.predict_grpc(grpc_address, SOURCES, MODEL, "score", targets=TARGETS)
    assert sorted(got) == ["log_prob", "per_token", "score"]
    assert client_cli.main(["--server", grpc_address, "--score", "no tab here"]) == 2
    assert "line 1 has no tab" in capsys.readouterr().err
