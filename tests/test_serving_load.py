"""The exported model under concurrent load, behind the gRPC test double in its own process
(`keras_transformer.serving.load`), and the double's emulation of TF Serving's batching.

Fast: the request mix is what it says; hostile requests are INVALID_ARGUMENT; batched
requests get exactly the answers they get alone; inputs without a batch dimension are
refused as TF Serving refuses them. Slow: 32 clients for 60 s of the mix.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.serving import load
from keras_transformer.testing.serving_double import (
    BatchingPredictionService,
    RequestError,
)

SENTENCES = ["The cat sleeps.", "A red house.", "Open the menu Tools - Options.", "Yes."]


def _inputs(proto) -> dict:
    return {key: tf.make_ndarray(value) for key, value in proto.inputs.items()}


def test_the_mix_draws_every_kind_and_hostile_ones_are_invalid_argument(serving_service):
    service = serving_service
    draw = load.mixed_requests(SENTENCES)
    rng, seen, checked = random.Random(0), set(), set()
    for _ in range(200):
        request = draw(rng)
        seen.add(request.kind)
        if not request.hostile or request.kind in checked:
            continue
        checked.add(request.kind)
        spec = request.proto.model_spec
        with pytest.raises(RequestError) as raised:
            service.run(spec.name, spec.signature_name, _inputs(request.proto))
        assert raised.value.code.name == "INVALID_ARGUMENT", request.kind
    assert {"sentences", "document", "nbest", "sample", "score"} <= seen
    assert {f"hostile:{name}" for name in load.HOSTILE} <= seen
    without = load.mixed_requests(SENTENCES, without=("sample", "hostile"))
    assert {without(rng).kind for _ in range(100)} == {"sentences", "document", "nbest", "score"}


def test_batched_requests_get_the_answers_they_get_alone(serving_export_dir, serving_service):
    """Concurrent requests merged into calls of up to 8 rows: each gets the rows it gets
    when sent alone (same strings; scores to 1e-4: the batch shape may move a float)."""
    from concurrent.futures import ThreadPoolExecutor

    alone = serving_service
    batching = BatchingPredictionService(
        serving_export_dir, max_batch_size=8, batch_timeout_micros=200_000, num_batch_threads=1
    )
    requests = [[SENTENCES[i % 4], SENTENCES[(i + 1) % 4]][: 1 + i % 2] for i in range(8)]
    inputs = [{"text": np.array([t.encode() for t in texts], dtype=object)} for texts in requests]
    with ThreadPoolExecutor(8) as pool:
        merged = list(pool.map(lambda x: batching.run("transformer", "", x), inputs))
    assert max(batching.batch_rows) > 2  # requests were merged
    for x, got in zip(inputs, merged):
        expected = alone.run("transformer", "", x)
        assert got["translations"].tolist() == expected["translations"].tolist()
        np.testing.assert_allclose(got["scores"], expected["scores"], atol=1e-4)


def test_batching_refuses_inputs_without_a_batch_dimension_as_tf_serving_does(serving_export_dir):
    batching = BatchingPredictionService(serving_export_dir, max_batch_size=8)
    inputs = {"text": np.array([b"Yes."], dtype=object), "temperature": np.array(1.0)}
    inputs.update(top_k=np.array(0, np.int64), top_p=np.array(1.0), seed=np.array(0, np.int64))
    with pytest.raises(RequestError, match="must have at least one dimension.*'temperature'"):
        batching.run("transformer", "translate_sample", inputs)


@pytest.mark.slow
def test_thirty_two_clients_for_a_minute(serving_export_dir):
    server, address = load.start_server(serving_export_dir)
    draw = load.mixed_requests(SENTENCES * 8)
    try:
        assert set(load.warm_up(address, draw)) == set(draw.kinds)
        report = load.run_load(address, draw, clients=32, seconds=60, server_pid=server.pid)
    finally:
        server.kill()
        server.wait()
    print(report)
    assert report["failed"] == 0, report["failed_codes"]
    assert report["hostile"] > 0 and report["hostile_other"] == []
    assert report["hostile_invalid_argument"] == report["hostile"]
    assert set(report["by_kind"]) == {"sentences", "document", "nbest", "sample", "score"}
    assert 0 < report["p50_ms"] <= report["p99_ms"]
    assert report["memory_mb"]["growth"] < 0.2, report["memory_mb"]
