"""Exact resume: the training stream is indexed by step, so a run killed with SIGKILL and
rerun ends with the very weights of an uninterrupted run (one device, two CPU replicas,
gradient accumulation; the kills are slow tests, `-m slow`).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from keras_transformer.testing.runs import (
    kill_after_step,
    max_abs_difference,
    run,
    train_command,
    write_tsv,
)


def test_training_stream_is_indexed_by_step(tmp_path):
    """Batch i is the same in any process, any iterator of the dataset, and after skip(i)."""
    from keras_transformer.data import corpus
    from keras_transformer.data.pipeline import make_batches
    from keras_transformer.data.tokenizer import SubwordTokenizer, train_sentencepiece

    write_tsv(tmp_path / "pairs.tsv")
    dataset = f"tsv:{tmp_path / 'pairs.tsv'}"
    spm = train_sentencepiece(
        (side for pair in corpus.read_pairs(dataset, "train") for side in pair),
        str(tmp_path / "spm.model"),
        vocab_size=60,
    )
    tokenizer = SubwordTokenizer.from_file(spm)

    def batches(skip):
        return make_batches(
            corpus.load_corpus(dataset, "train"), tokenizer, 32, 256, cache=True, seed=7,
            skip_batches=skip,
        )  # fmt: skip

    def labels(data, count):
        return [labels.numpy() for _, labels in data.take(count)]

    stream = batches(0)
    full = labels(stream, 24)  # about 3 passes over the corpus
    again = labels(stream, 24)  # a second iterator of the same dataset (Keras makes two)
    resumed = labels(batches(17), 7)
    assert all(np.array_equal(a, b) for a, b in zip(full, again))
    assert all(np.array_equal(a, b) for a, b in zip(full[17:], resumed))


@pytest.mark.slow
@pytest.mark.parametrize(
    "replicas, accumulate",
    [(1, 1), (2, 1), (1, 2)],
    ids=["one_device", "two_cpu_replicas", "accumulate_2"],
)
def test_kill9_and_rerun_equals_uninterrupted_run(tmp_path, replicas, accumulate, background):
    write_tsv(tmp_path / "pairs.tsv")
    flags = ["--strategy", "mirrored", "--cpu-replicas", "2"] if replicas == 2 else []
    flags += ["--accumulate-steps", str(accumulate)]
    every, steps = 5, 30
    uninterrupted = train_command(tmp_path / "pairs.tsv", tmp_path / "a", *flags)
    resumed = train_command(tmp_path / "pairs.tsv", tmp_path / "b", *flags)
    reference = background(uninterrupted, tmp_path / "a-log")  # beside the killed run
    killed_at = kill_after_step(resumed, random.randint(every + 1, steps - every - 1))
    assert not (tmp_path / "b" / "final.weights.h5").exists()
    result = run(resumed)
    assert result.returncode == 0, result.stderr[-3000:]
    done = reference.result()
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    # The kill lands at or after the logged step: at most one interval of steps is lost.
    assert killed_at - summary["resumed_from_step"] < every, (killed_at, summary)
    assert summary["steps"] == steps
    for name in ("final.weights.h5", f"checkpoints/ckpt-{steps:08d}.weights.h5"):
        difference = max_abs_difference(tmp_path / "a" / name, tmp_path / "b" / name)
        print(
            f"{replicas} replica(s), accumulate {accumulate}: killed after step {killed_at}, "
            "resumed from step "
            f"{summary['resumed_from_step']}, {name} max abs difference {difference:.3g}"
        )
        assert difference <= 1e-6, (name, difference, killed_at)
