"""Eight replicas update exactly as one device with the eight-times batch.

MirroredStrategy over 8 logical CPU devices against the default strategy, both fed the same
global batches (uneven padding, so the replicas hold different numbers of real tokens): after
20 updates the weights agree to 1e-5, with and without gradient accumulation. Dropout is 0 in
both (each replica draws its own dropout masks, so with dropout they differ by design).
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from keras_transformer.training.distribute import configure_devices
    configure_devices(8)
    import keras, tensorflow as tf
    from keras_transformer import TransformerConfig, build_transformer
    from keras_transformer.config import TrainingConfig
    from keras_transformer.training.trainer import compile_model

    accumulate, updates, rows = int(sys.argv[1]), 20, 16  # 16 rows: 2 per replica
    config = TransformerConfig.tiny(40, num_layers=1, d_model=32, d_ff=64, dropout=0.0)
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(updates * accumulate):
        source = rng.integers(4, 40, size=(rows, 9)).astype("int32")
        labels = rng.integers(4, 40, size=(rows, 8)).astype("int32")
        for row in range(rows):  # each row its own length: replicas get uneven token counts
            source[row, rng.integers(2, 10):] = 0
            labels[row, rng.integers(1, 9):] = 0
        target = np.concatenate([np.full((rows, 1), 2, "int32"), labels[:, :-1]], 1)
        batches.append(({"source": source, "target": target}, labels))
    counts = [[int((b[1][r:r + 2] != 0).sum()) for r in range(0, rows, 2)] for b in batches]

    def dataset():
        spec = tf.TensorSpec((None, None), tf.int32)
        return tf.data.Dataset.from_generator(
            lambda: iter(batches), output_signature=({"source": spec, "target": spec}, spec)
        )

    keras.utils.set_random_seed(0)
    initial = build_transformer(config).get_weights()
    cfg = TrainingConfig.from_flat(warmup_steps=4, batch_tokens=64, max_length=16,
                                   accumulate_steps=accumulate, train_steps=updates)
    result = {}
    strategies = {
        "one_device": tf.distribute.get_strategy(),
        "mirrored": tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(8)]),
    }
    for name, strategy in strategies.items():
        with strategy.scope():
            model = build_transformer(config)
            model.set_weights(initial)
            compile_model(model, config, cfg)
        history = model.fit(dataset(), epochs=1, verbose=0)
        result[name] = {
            "replicas": strategy.num_replicas_in_sync,
            "updates": int(model.optimizer.iterations.numpy()),
            "loss": history.history["loss"][0],
            "weights": {v.path: v.numpy().ravel().tolist() for v in model.weights},
            "logits": model(batches[0][0]).numpy().ravel().tolist(),
        }
    result["initial"] = [w.ravel().tolist() for w in initial]
    result["tokens_per_replica"] = counts
    print(json.dumps(result))
    """
)


@pytest.mark.slow  # ~35 s each on 2 cores; test_training.py checks 2 replicas by default
@pytest.mark.parametrize("accumulate", [1, 2], ids=["one_batch_an_update", "accumulate_2"])
def test_eight_replicas_update_like_one_device_with_the_eight_times_batch(accumulate):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(accumulate)],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    runs = json.loads(result.stdout.strip().splitlines()[-1])
    one, mirrored = runs["one_device"], runs["mirrored"]
    assert (one["replicas"], mirrored["replicas"]) == (1, 8)
    assert one["updates"] == mirrored["updates"] == 20
    # The replicas really held different numbers of real tokens (else a per-replica mean
    # would be exact too, and the test would not tell the two losses apart).
    assert any(len(set(counts)) > 1 for counts in runs["tokens_per_replica"])
    initial = np.concatenate(runs["initial"])
    a, b = (np.concatenate(list(run["weights"].values())) for run in (one, mirrored))
    assert np.abs(a - initial).max() > 1e-2  # it trained
    # Attention's key bias adds q.b_k to every logit of a query: softmax cancels it, so its
    # true gradient is zero and what Adam sees is rounding noise (~1e-9), which it normalizes
    # into steps of the learning rate's size, different for every summation order. Those
    # biases differ; the function does not (the logits below). The key kernels carry a little
    # of the same noise (the part of W_K x that is the same for every key cancels too): CI saw
    # 1.07e-5 there after 20 updates, so weights get 1e-4 (a hundredth of what training moved
    # them) and the function the tight 1e-5.
    for path, weights in one["weights"].items():
        if not path.endswith("key/bias"):
            difference = np.abs(np.array(weights) - np.array(mirrored["weights"][path])).max()
            assert difference <= 1e-4, (path, difference)
    np.testing.assert_allclose(mirrored["logits"], one["logits"], atol=1e-5)
    np.testing.assert_allclose(mirrored["loss"], one["loss"], rtol=1e-5)


@pytest.mark.slow
def test_train_wmt_with_eight_cpu_replicas_says_so_in_its_log_and_checkpoints(tmp_path):
    from keras_transformer import artifacts
    from keras_transformer.testing.runs import ENV, train_command, write_tsv
    from keras_transformer.training.checkpoints import checkpoint_run

    write_tsv(tmp_path / "pairs.tsv")
    command = train_command(
        tmp_path / "pairs.tsv", tmp_path / "run", "--strategy", "mirrored", "--cpu-replicas", "8",
        steps=24, every=12,
    )  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["replicas"] == 8 and summary["steps"] == 24
    assert "with 8 replica(s) x 256 tokens x 1 micro-batch(es): global batch up to 2048 tokens" in (
        result.stdout + result.stderr
    )
    last = artifacts.latest_checkpoint_in(str(tmp_path / "run" / "checkpoints"))
    assert checkpoint_run(last) == {
        "step": 24, "preempted": 0, "nonfinite_steps": 0, "replicas": 8, "accumulate_steps": 1,
        "batch_tokens_per_replica": 256, "global_batch_tokens": 2048, "precision": "none",
    }  # fmt: skip
    # Resumed on 2 replicas, the run would skip 24 batches of another size: refused at once,
    # in one line naming both counts, and the run's files left as they were.
    saved = (tmp_path / "run" / "training_config.json").read_text()
    command[command.index("--cpu-replicas") + 1] = "2"
    command[command.index("--train-steps") + 1] = "36"
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=ENV)
    assert result.returncode == 2, result.stderr[-3000:]
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith(f"error: {last} was written with replicas=8"), last_line
    assert last_line.endswith("Received: replicas=2, checkpoint's replicas=8"), last_line
    assert (tmp_path / "run" / "training_config.json").read_text() == saved
    assert artifacts.latest_checkpoint_in(str(tmp_path / "run" / "checkpoints")) == last
