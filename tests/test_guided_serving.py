"""The guided signatures (`translate_guided`, `translate_alternatives`) of the shared test
export, through the gRPC and REST client against the TF Serving test double: batched, equal
to the signature called directly, servable ops only, hostile requests answered or refused in
bounded time while the server keeps serving."""

from __future__ import annotations

import re
import time

import pytest
import tensorflow as tf

from keras_transformer.serving import client
from keras_transformer.serving.op_check import read_saved_model, unservable_ops
from keras_transformer.testing.serving_double import serve_grpc, serve_rest

pytestmark = pytest.mark.slow  # a module fixture exports a model
MODEL = "transformer"
TEXTS = ["The cat sleeps number 1.", "Der Hund schläft. Le chat dort.", ""]
GUIDES = {
    "prefix": ["Die Ka", "", "Hallo "],
    "constraints": ["", "chat", ""],
    "avoid": ["Hund", "", ""],
    # A target the tiny 64-piece vocabulary spells ("chien" has an "i" it lacks: such a
    # constraint is not forced and not met, tests/test_prefix.py).
    "glossary": ["", "Hund\tdort", ""],
}


@pytest.fixture(scope="module")
def servers(serving_service):
    grpc_server, grpc_port = serve_grpc(serving_service)
    httpd, rest_port = serve_rest(serving_service)
    yield {"grpc": f"127.0.0.1:{grpc_port}", "rest": f"http://127.0.0.1:{rest_port}"}
    grpc_server.stop(grace=None)
    httpd.shutdown()
    httpd.server_close()


def predict(servers, transport, signature, texts, guides, **options):
    call = client.predict_grpc if transport == "grpc" else client.predict_rest
    return call(servers[transport], texts, MODEL, signature, guides=guides, **options)


def direct(service, signature, texts, guides) -> dict:
    inputs = {key: tf.constant(value) for key, value in guides.items()}
    out = service.loaded.signatures[signature](text=tf.constant(texts), **inputs)
    return {k: v.numpy().tolist() for k, v in out.items()}


def test_guided_export_has_only_servable_ops(serving_export_dir):
    assert unservable_ops(serving_export_dir) == set()


def test_guided_graphs_are_stored_once(serving_export_dir):
    # As test_export's check of the other signatures: each traced once, stored once.
    library = read_saved_model(serving_export_dir).meta_graphs[0].graph_def.library
    names = [f.signature.name for f in library.function]
    for method in ("_guided_one", "_guided_alternatives", "translate"):
        assert len([n for n in names if re.fullmatch(f"__inference_{method}_\\d+", n)]) == 1


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_guided_signatures_over_the_client_batched(serving_service, servers, transport):
    got = predict(servers, transport, "translate_guided", TEXTS, GUIDES)
    want = direct(serving_service, "translate_guided", TEXTS, GUIDES)
    assert got["translations"] == [t.decode() for t in want["translations"]]
    assert got["scores"] == pytest.approx(want["scores"], abs=1e-5)
    assert got["constraints_met"] == want["constraints_met"]
    for text, prefix in zip(got["translations"], GUIDES["prefix"]):
        assert text.startswith(prefix)
    assert "chat" in got["translations"][1] and "dort" in got["translations"][1]
    assert got["constraints_met"][1]
    alternatives = predict(servers, transport, "translate_alternatives", TEXTS, GUIDES)
    assert len(alternatives["translations"]) == len(TEXTS)
    assert all(len(row) == 2 for row in alternatives["translations"])  # n_best of the export


def test_hostile_requests_are_bounded_and_the_server_keeps_serving(servers):
    glossary = "\n".join(f"term{i}\tT{i}" for i in range(100))
    answered = {
        "regex syntax": {"glossary": ["a+)*(\tX\n.*\tY\n\\b\tZ"], "avoid": [".*"]},
        "glossary at the limit": {"glossary": [glossary]},
        "empty constraint": {"constraints": ["\t \t"]},
    }
    refused = {
        "glossary past the limit": {"glossary": [glossary + "\nterm100\tT100"]},
        "prefix of 100,000 bytes": {"prefix": ["x" * 100_000]},
        "malformed glossary line": {"glossary": ["no tab here"]},
    }
    for name, guides in answered.items():
        start = time.perf_counter()
        out = predict(servers, "grpc", "translate_guided", ["a+)*( .* text"], guides)
        assert len(out["translations"]) == 1, name
        assert time.perf_counter() - start < 60, name
    for name, guides in refused.items():
        start = time.perf_counter()
        with pytest.raises(client.ServingError) as error:
            predict(servers, "rest", "translate_guided", ["text"], guides, retries=0)
        assert error.value.code == "INVALID_ARGUMENT", name
        assert time.perf_counter() - start < 60, name
    plain = client.predict_grpc(servers["grpc"], TEXTS, MODEL)
    assert len(plain["translations"]) == len(TEXTS)
