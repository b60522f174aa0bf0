"""The tf.data service option (`--data-service`): a dispatcher and one worker on loopback, in
this process. Through the service the batches are the pipeline's own, and a training run
through it (a subprocess that reads from this process's worker) ends with the weights of a
run that read the same prepared corpus itself (slow: two runs)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data import corpus, prepared
from keras_transformer.data import prepared_manifest as manifests
from keras_transformer.data.pipeline import through_data_service
from keras_transformer.data.tokenizer import train_sentencepiece
from keras_transformer.testing.runs import max_abs_difference, run, train_command, write_tsv


@pytest.fixture(scope="module")
def service():
    """`(dispatcher address, worker)`: a loopback tf.data service with one worker."""
    dispatcher = tf.data.experimental.service.DispatchServer()
    address = dispatcher.target.split("://")[1]
    config = tf.data.experimental.service.WorkerConfig(dispatcher_address=address)
    worker = tf.data.experimental.service.WorkerServer(config)
    yield dispatcher.target, worker
    worker.stop()
    dispatcher.stop()


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    root = tmp_path_factory.mktemp("service")
    write_tsv(root / "pairs.tsv")
    dataset = f"tsv:{root / 'pairs.tsv'}"
    sides = (side for pair in corpus.read_pairs(dataset, "train") for side in pair)
    spm = train_sentencepiece(sides, str(root / "spm.model"), vocab_size=60)
    return prepared.prepare(dataset, str(root / "out"), spm, examples_per_shard=150)


def test_batches_through_the_service_are_the_pipelines_own(service, manifest):
    address, _ = service
    batches = prepared.prepared_batches(manifest, max_length=32, batch_tokens=64, seed=5)
    expected = [labels.numpy() for _, labels in batches.take(12)]
    served = through_data_service(batches.take(12), address)
    got = [labels.numpy() for _, labels in served]
    assert len(got) == len(expected) == 12
    assert all(np.array_equal(a, b) for a, b in zip(expected, got))


@pytest.mark.slow
def test_training_through_the_service_equals_training_on_the_files(service, manifest, tmp_path):
    address, _ = service
    flags = ["--dataset", manifests.PREFIX + manifest.directory, "--batch-tokens", "64"]
    local = run(train_command("unused", tmp_path / "local", *flags, steps=8, every=4))
    assert local.returncode == 0, local.stderr[-3000:]
    served = run(
        train_command(
            "unused", tmp_path / "served", *flags, "--data-service", address, steps=8, every=4
        )
    )
    assert served.returncode == 0, served.stderr[-3000:]
    assert "tf.data service" in served.stderr
    summary = json.loads((tmp_path / "served" / "summary.json").read_text())
    assert summary["steps"] == 8
    difference = max_abs_difference(
        tmp_path / "local" / "final.weights.h5", tmp_path / "served" / "final.weights.h5"
    )
    assert difference <= 1e-6, difference
