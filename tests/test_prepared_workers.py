"""Prepared corpora under MultiWorkerMirroredStrategy (FILE sharding,
`training.worker_input`): two workers on loopback read disjoint shards whose epochs together
hold one worker's epoch, and a two-worker training run on prepared shards finishes (SERIAL:
they start processes of their own)."""

from __future__ import annotations

import collections
import json
import sys

import pytest
import tensorflow as tf

from keras_transformer.config import TrainingConfig
from keras_transformer.data import corpus, prepared
from keras_transformer.data import prepared_manifest as manifests
from keras_transformer.data.pipeline import bucket_layout
from keras_transformer.data.tokenizer import train_sentencepiece
from keras_transformer.testing.runs import run, train_command, write_tsv

pytestmark = pytest.mark.slow
LAUNCH = [sys.executable, "-m", "keras_transformer.training.launch", "--workers", "2", "--"]
LAYOUT = dict(max_length=32, batch_tokens=64)  # worker_epochs' defaults


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    """The 300-pair toy corpus prepared in 4 shards (75, 75, 75, 72 pairs)."""
    root = tmp_path_factory.mktemp("workers")
    write_tsv(root / "pairs.tsv")
    dataset = f"tsv:{root / 'pairs.tsv'}"
    sides = (side for pair in corpus.read_pairs(dataset, "train") for side in pair)
    spm = train_sentencepiece(sides, str(root / "spm.model"), vocab_size=60)
    return prepared.prepare(dataset, str(root / "out"), spm, examples_per_shard=75)


def _shard_rows(manifest, shards) -> collections.Counter:
    """The label rows (target pieces + EOS) of `shards`, read from the files themselves."""
    files = [manifest.shard_path(manifest.shards[i]) for i in shards]
    rows = collections.Counter()
    for record in tf.data.TFRecordDataset(files):
        target = tf.train.Example.FromString(record.numpy()).features.feature["target"]
        rows[(*target.int64_list.value, 3)] += 1
    return rows


def _one_worker_epoch(manifest) -> collections.Counter:
    """The label rows of one epoch of the one-worker stream (no cluster)."""
    seed = TrainingConfig.from_flat().recipe.seed  # worker_epochs' run
    batches = prepared.prepared_batches(manifest, **LAYOUT, seed=seed)
    boundaries, sizes = bucket_layout(LAYOUT["max_length"], LAYOUT["batch_tokens"], 1, True)
    count = sum(
        prepared.shard_batch_count(shard, boundaries, sizes, LAYOUT["max_length"])
        for shard in manifest.shards
    )
    rows = collections.Counter()
    for _, labels in batches.take(count):
        rows.update(tuple(int(i) for i in row if i != 0) for row in labels.numpy())
    return rows


def test_two_workers_read_disjoint_shards_and_together_one_workers_epoch(manifest, tmp_path):
    spec = manifests.PREFIX + manifest.directory
    command = [sys.executable, "-m", "keras_transformer.testing.worker_epochs"]
    result = run(LAUNCH + command + ["--dataset", spec, "--out", str(tmp_path)])
    assert result.returncode == 0, result.stdout[-4000:]
    records = [json.loads((tmp_path / f"worker-{w}.json").read_text()) for w in (0, 1)]
    assert [r["shards"] for r in records] == [[0, 2], [1, 3]]
    epochs = []
    for record in records:
        rows = collections.Counter(tuple(row) for row in record["rows"])
        # Only its own shards: every row it trained on is a row of those files.
        assert not rows - _shard_rows(manifest, record["shards"]), record["worker"]
        epochs.append(rows)
    single = _one_worker_epoch(manifest)
    assert epochs[0] + epochs[1] == single
    print(
        f"worker batches per epoch {[r['batches'] for r in records]}, examples "
        f"{[sum(e.values()) for e in epochs]}, one worker {sum(single.values())}"
    )


def test_two_worker_training_on_prepared_shards_finishes(manifest, tmp_path):
    flags = ["--dataset", manifests.PREFIX + manifest.directory, "--batch-tokens", "64"]
    command = train_command("unused", tmp_path / "mw", *flags, steps=4, every=2)
    result = run(LAUNCH + command[2:])
    assert result.returncode == 0, result.stdout[-4000:]
    lines = result.stdout.splitlines()
    for worker, shards in ((0, "[0, 2]"), (1, "[1, 3]")):
        assert any(f"worker {worker} of 2 reads shards {shards}" in line for line in lines)
    summary = json.loads((tmp_path / "mw" / "summary.json").read_text())
    assert summary["steps"] == 4 and summary["replicas"] == 2
