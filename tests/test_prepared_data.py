"""Prepared corpora (`data.prepared`): shards hold what SentencePiece itself gives, the stream
seeks to batch i without replaying (equal to the stream read from the start) and opens no
skipped shard, workers read disjoint shards that together are one worker's epoch, and
training refuses another vocabulary. The kill -9 and SIGTERM resumes on prepared shards are
slow tests (`-m slow`)."""

from __future__ import annotations

import collections
import itertools
import json
import random

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.data import corpus, prepared
from keras_transformer.data import prepared_manifest as manifests
from keras_transformer.data.pipeline import bucket_batches, bucket_layout
from keras_transformer.data.tokenizer import train_sentencepiece
from keras_transformer.testing.runs import (
    kill_after_step,
    max_abs_difference,
    run,
    sigterm_after_step,
    train_command,
    write_tsv,
)
from keras_transformer.training import checkpoints
from keras_transformer.training.errors import PREEMPTED_STATUS

LAYOUT = dict(max_length=32, batch_tokens=64)  # buckets of 8 to 2 sentences


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    """A 300-pair TSV, its 60-piece vocabulary and the corpus prepared in shards of 100."""
    root = tmp_path_factory.mktemp("prepared")
    write_tsv(root / "pairs.tsv")
    dataset = f"tsv:{root / 'pairs.tsv'}"
    sides = (side for pair in corpus.read_pairs(dataset, "train") for side in pair)
    spm = train_sentencepiece(sides, str(root / "spm.model"), vocab_size=60)
    manifest = prepared.prepare(dataset, str(root / "out"), spm, examples_per_shard=100)
    return root, dataset, manifest


def _rows(batches, count):
    """The unpadded label rows of `count` batches, as tuples."""
    rows = []
    for _, labels in batches.take(count):
        rows += [tuple(int(i) for i in row if i != 0) for row in labels.numpy()]
    return rows


def test_shards_hold_sentencepiece_ids_of_every_pair_in_order(corpus_dir):
    import sentencepiece

    root, dataset, manifest = corpus_dir
    reference = sentencepiece.SentencePieceProcessor(model_file=str(root / "spm.model"))
    pairs = list(corpus.read_pairs(dataset, "train"))
    files = [manifest.shard_path(shard) for shard in manifest.shards]
    records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(files)]
    assert manifest.examples == len(pairs) == len(records)
    assert [shard.examples for shard in manifest.shards[:-1]] == [100] * (len(files) - 1)
    for (source, target), record in zip(pairs, records):
        feature = record.features.feature
        assert list(feature["source"].int64_list.value) == reference.encode(source)
        assert list(feature["target"].int64_list.value) == reference.encode(target)
    on_disk = json.loads((root / "out" / "manifest.json").read_text())
    assert on_disk["dataset"] == dataset
    assert on_disk["vocabulary"]["sha256"] == manifests.sha256_of((root / "spm.model").read_bytes())


@pytest.mark.parametrize("pad", [True, False])
def test_shard_batches_are_tf_data_bucketing_and_counted_from_the_histogram(corpus_dir, pad):
    """The vectorized batches of a shard equal tf.data's `bucket_by_sequence_length` of its
    examples one by one, and their number is `shard_batch_count`'s arithmetic."""
    _, _, manifest = corpus_dir
    boundaries, sizes = bucket_layout(32, 64, 1, pad)
    layout = dict(boundaries=boundaries, sizes=sizes, max_length=32, pad_to_bucket_boundary=pad)
    for index in (0, len(manifest.shards) - 1):  # a full shard, the last (partial) one
        shard = manifest.shards[index]
        path = manifest.shard_path(shard)
        examples = prepared._shard_examples(path, 3, 1, index, 32)
        reference = list(bucket_batches(examples, 32, 64, 1, pad, True))
        got = list(prepared._shard_batches(path, 3, 1, index, layout))
        assert (
            len(got) == len(reference) == prepared.shard_batch_count(shard, boundaries, sizes, 32)
        )
        for a, b in zip(reference, got):
            assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)


def _epoch_batches(manifest, shards=None):
    boundaries, sizes = bucket_layout(32, 64, 1, True)
    shards = range(len(manifest.shards)) if shards is None else shards
    return sum(
        prepared.shard_batch_count(manifest.shards[i], boundaries, sizes, 32) for i in shards
    )


@pytest.mark.parametrize("epoch, offset", [(0, 0), (0, 5), (1, 3)])
def test_seek_gives_the_batches_the_stream_gives_from_there(corpus_dir, epoch, offset):
    _, _, manifest = corpus_dir
    start = epoch * _epoch_batches(manifest) + offset
    full = prepared.prepared_batches(manifest, **LAYOUT, seed=3)
    sought = prepared.prepared_batches(manifest, **LAYOUT, seed=3, start_batch=start)
    expected = [labels.numpy() for _, labels in full.take(start + 6)][start:]
    got = [labels.numpy() for _, labels in sought.take(6)]
    assert all(np.array_equal(a, b) for a, b in zip(expected, got))


def test_an_epoch_has_each_pair_at_most_once_and_leaves_out_only_remainders(corpus_dir):
    _, _, manifest = corpus_dir
    _, sizes = bucket_layout(32, 64, 1, True)
    per_epoch = _epoch_batches(manifest)
    rows = _rows(prepared.prepared_batches(manifest, **LAYOUT, seed=3), per_epoch)
    labels = collections.Counter(_all_label_rows(manifest))
    assert not collections.Counter(rows) - labels  # no pair more often than in the corpus
    # Left out: less than one batch per bucket and shard.
    assert 0 <= len(labels) - len(rows) < len(manifest.shards) * len(sizes) * max(sizes)


def _all_label_rows(manifest):
    files = [manifest.shard_path(shard) for shard in manifest.shards]
    for record in tf.data.TFRecordDataset(files):
        target = tf.train.Example.FromString(record.numpy()).features.feature["target"]
        yield (*target.int64_list.value, 3)  # pieces + EOS


def test_two_workers_read_disjoint_shards_that_make_one_workers_epoch(corpus_dir):
    _, _, manifest = corpus_dir
    shards = [prepared.worker_shards(manifest, w, 2) for w in (0, 1)]
    assert not set(shards[0]) & set(shards[1])
    assert sorted(shards[0] + shards[1]) == list(range(len(manifest.shards)))
    epochs = []
    for worker, workers in [(0, 1), (0, 2), (1, 2)]:
        own = prepared.worker_shards(manifest, worker, workers)
        batches = prepared.prepared_batches(
            manifest, **LAYOUT, seed=3, worker=worker, num_workers=workers
        )
        epochs.append(collections.Counter(_rows(batches, _epoch_batches(manifest, own))))
    single, first, second = epochs
    assert first + second == single
    with pytest.raises(ValueError, match="num_workers=99"):
        prepared.worker_shards(manifest, 0, 99)


def test_another_vocabulary_is_refused_naming_both(corpus_dir, tmp_path):
    root, dataset, manifest = corpus_dir
    sides = (side.upper() for pair in corpus.read_pairs(dataset, "train") for side in pair)
    other = train_sentencepiece(sides, str(tmp_path / "other.model"), vocab_size=50)
    proto = (tmp_path / "other.model").read_bytes()
    with pytest.raises(ValueError, match="another vocabulary") as error:
        manifests.check_vocabulary(manifest, proto, other)
    assert manifest.vocabulary_sha256[:16] in str(error.value)
    assert manifests.sha256_of(proto)[:16] in str(error.value)
    manifests.check_vocabulary(manifest, (root / "spm.model").read_bytes(), "same")


def test_prepared_dataset_reads_its_corpus_text_for_dev_and_test(corpus_dir):
    _, dataset, manifest = corpus_dir
    spec = manifests.PREFIX + manifest.directory
    for split in ("dev", "test"):
        assert list(corpus.read_pairs(spec, split)) == list(corpus.read_pairs(dataset, split))


@pytest.mark.slow
def test_kill9_and_rerun_on_prepared_shards_equals_uninterrupted_run(
    tmp_path, corpus_dir, background
):
    _, _, manifest = corpus_dir
    every, steps = 5, 30
    flags = ["--dataset", manifests.PREFIX + manifest.directory, "--batch-tokens", "64"]
    uninterrupted = train_command("unused", tmp_path / "a", *flags, steps=steps, every=every)
    resumed = train_command("unused", tmp_path / "b", *flags, steps=steps, every=every)
    reference = background(uninterrupted, tmp_path / "a-log")  # beside the killed run
    killed_at = kill_after_step(resumed, random.randint(every + 1, steps - every - 1))
    result = run(resumed)
    assert result.returncode == 0, result.stderr[-3000:]
    done = reference.result()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(a seek, no replay)" in result.stderr
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert 0 < summary["resumed_from_step"] <= killed_at and summary["steps"] == steps
    difference = max_abs_difference(
        tmp_path / "a" / "final.weights.h5", tmp_path / "b" / "final.weights.h5"
    )
    print(
        f"killed after step {killed_at}, resumed from {summary['resumed_from_step']}: "
        f"max abs difference {difference:.3g}"
    )
    assert difference <= 1e-6


@pytest.mark.slow
def test_sigterm_and_rerun_on_prepared_shards_equals_uninterrupted_run(
    tmp_path, corpus_dir, background
):
    _, _, manifest = corpus_dir
    grace, steps, every = 20, 30, 10
    flags = ["--dataset", manifests.PREFIX + manifest.directory, "--batch-tokens", "64",
             "--preemption-grace-seconds", str(grace)]  # fmt: skip
    uninterrupted = train_command("unused", tmp_path / "a", *flags, steps=steps, every=every)
    resumed = train_command("unused", tmp_path / "b", *flags, steps=steps, every=every)
    reference = background(uninterrupted, tmp_path / "a-log")  # beside the stopped run
    at = random.randint(3, steps - 3)
    code, seconds, log = sigterm_after_step(resumed, at, grace)
    assert code == PREEMPTED_STATUS, log[-3000:]
    saved = artifacts.latest_checkpoint_in(str(tmp_path / "b" / "checkpoints"))
    saved_step = checkpoints.checkpoint_run(saved)["step"]
    assert at <= saved_step <= at + 2, (at, saved)  # nothing lost
    result = run(resumed)
    assert result.returncode == 0, result.stderr[-3000:]
    done = reference.result()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(a seek, no replay)" in result.stderr
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["resumed_from_step"] == saved_step and summary["steps"] == steps
    difference = max_abs_difference(
        tmp_path / "a" / "final.weights.h5", tmp_path / "b" / "final.weights.h5"
    )
    print(
        f"SIGTERM after step {at}, exit {code} {seconds:.1f}s later, checkpoint at "
        f"{saved_step}; final weights max abs difference {difference:.3g}"
    )
    assert difference <= 1e-6


@pytest.mark.slow
def test_a_seek_reads_no_skipped_shard(corpus_dir, tmp_path):
    """A seek into the last shard of epoch 1 works with every other shard's file gone (all of
    epoch 0 and the shards before it in epoch 1 are skipped, never opened) and gives the
    batches of the stream read from the start."""
    import shutil

    _, _, manifest = corpus_dir
    order = prepared._epoch_order(len(manifest.shards), 3, 1).numpy()
    last = int(order[-1])
    before = [int(i) for i in order[:-1]]
    start = _epoch_batches(manifest) + _epoch_batches(manifest, before) + 1
    kept = tmp_path / "one_shard"
    kept.mkdir()
    for name in (manifests.MANIFEST_FILE, manifests.VOCABULARY_FILE):
        shutil.copy(f"{manifest.directory}/{name}", kept / name)
    shutil.copy(manifest.shard_path(manifest.shards[last]), kept)
    sought = prepared.prepared_batches(
        manifests.load(str(kept)), **LAYOUT, seed=3, start_batch=start
    )
    full = prepared.prepared_batches(manifest, **LAYOUT, seed=3)
    expected = [labels.numpy() for _, labels in full.take(start + 2)][start:]
    got = [labels.numpy() for _, labels in sought.take(2)]
    assert len(got) == 2 and all(np.array_equal(a, b) for a, b in zip(expected, got))


@pytest.mark.slow
def test_a_shard_of_more_than_46341_examples_is_bucketed_as_tf_data_buckets_it(tmp_path):
    """Sort keys of (emission, position) pairs outgrow int32 at 46,341 examples a shard (the
    run's default shard holds 500,000): the shard's batches still equal tf.data's."""
    rng = np.random.default_rng(0)
    path = str(tmp_path / "big.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for n, m in rng.integers(1, 31, size=(50_000, 2)):
            writer.write(prepared._example(rng.integers(4, 60, n), rng.integers(4, 60, m)))
    boundaries, sizes = bucket_layout(32, 256, 1, True)
    layout = dict(boundaries=boundaries, sizes=sizes, max_length=32, pad_to_bucket_boundary=True)
    examples = prepared._shard_examples(path, 3, 1, 0, 32)
    reference = bucket_batches(examples, 32, 256, 1, True, True)
    got = prepared._shard_batches(path, 3, 1, 0, layout)
    count = 0
    for a, b in itertools.zip_longest(reference, got):
        assert a is not None and b is not None, count  # as many batches
        assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
        count += 1
    assert count > 1000
