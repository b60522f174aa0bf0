"""Long runs that survive: a non-finite loss stops (or skips) without saving anything from it, a
run killed with SIGKILL resumes to the very weights of an uninterrupted run, and a bad model
directory, corpus or flag fails in the first seconds with one `error:` line.

The end-to-end runs use `pipelines/train_wmt.py` on a 300-line TSV corpus with a one-layer
model; the slow ones (`-m slow`) kill and rerun trainings.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.config import TrainingConfig, TransformerConfig
from keras_transformer.testing.model_dir import TINY_TRAIN_FLAGS
from keras_transformer.training import checkpoints, distribute, launch, preflight
from keras_transformer.training.errors import NonFiniteLossError
from keras_transformer.training.nonfinite import NonFiniteGuard, SkipNonFiniteAdam

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(REPO, "pipelines", "train_wmt.py")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="")


def write_tsv(path, n=300):
    rng = np.random.default_rng(0)
    words = ["red", "green", "blue", "house", "tree", "car", "small", "big", "the", "a"]
    with open(path, "w") as f:
        for _ in range(n):
            sentence = " ".join(rng.choice(words, size=rng.integers(2, 8)))
            f.write(f"{sentence}\t{sentence.upper()}\n")


def train_command(tsv, model_dir, *flags, steps=30, every=5):
    return [
        sys.executable, TRAIN, "--dataset", f"tsv:{tsv}", "--model-dir", str(model_dir),
        *TINY_TRAIN_FLAGS, "--dropout", "0.1", "--batch-tokens", "256", "--max-length", "32",
        "--warmup-steps", "10", "--train-steps", str(steps), "--steps-per-epoch", "6",
        "--checkpoint-every-steps", str(every), "--keep-checkpoints", "3", "--average-last",
        "2", "--eval-limit", "0", "--export-dir", "none", "--log-every-steps", "1",
        "--eval-every-steps", "0", *flags,
    ]  # fmt: skip


def run(command, timeout=600):
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV)


def h5_arrays(path) -> dict[str, np.ndarray]:
    arrays = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, obj: (
                arrays.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return arrays


def max_abs_difference(path_a, path_b) -> float:
    a, b = h5_arrays(path_a), h5_arrays(path_b)
    assert a.keys() == b.keys()
    return max(
        float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64))))
        for k in a
        if a[k].size
    )


def all_finite(path) -> bool:
    return all(np.isfinite(v).all() for v in h5_arrays(path).values() if v.dtype.kind == "f")


# Non-finite guard ------------------------------------------------------------------------------


def _dense_run(max_skipped):
    """Six steps on a Dense model; batch 3 holds a NaN. Returns (weights per step, error)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 8, 3)).astype("float32")
    y = rng.normal(size=(6, 8, 1)).astype("float32")
    x[2, 5, 0] = np.nan
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(SkipNonFiniteAdam(0.1), "mse")
    seen = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: seen.append(
            (int(model.optimizer.iterations.numpy()), model.get_weights()[0].copy(), logs["loss"])
        )
    )
    guard = NonFiniteGuard(max_skipped, lambda: "ckpt-00000002.weights.h5")
    error = None
    try:
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)), verbose=0, callbacks=[guard, record])
    except NonFiniteLossError as raised:
        error = raised
    return model, seen, error


def test_poisoned_batch_stops_training_before_anything_acts_on_it():
    model, seen, error = _dense_run(max_skipped=0)
    assert error is not None and error.step == 3
    assert "non-finite loss or gradients at step 3" in str(error)
    assert "ckpt-00000002.weights.h5" in str(error)
    assert [step for step, _, _ in seen] == [1, 2]  # the guard ran first: no callback saw 3
    assert np.isfinite(model.get_weights()[0]).all()
    np.testing.assert_array_equal(model.get_weights()[0], seen[-1][1])  # step 3 not applied


def test_skip_nonfinite_batches_skips_the_update_and_goes_on():
    model, seen, error = _dense_run(max_skipped=1)
    assert error is None and [step for step, _, _ in seen] == [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(seen[2][1], seen[1][1])  # step 3 left the weights alone
    assert not np.array_equal(seen[3][1], seen[2][1])  # step 4 trained again
    assert np.isfinite(seen[3][2]) and np.isfinite(model.get_weights()[0]).all()  # metrics reset
    assert int(model.optimizer.nonfinite_steps.numpy()) == 1


MIRRORED_GUARD = """
from keras_transformer.training.trainer import configure_devices
configure_devices(2)
import numpy as np, tensorflow as tf, keras
from keras_transformer.training.nonfinite import SkipNonFiniteAdam
rng = np.random.default_rng(0)
x = rng.normal(size=(3, 8, 3)).astype("float32"); y = rng.normal(size=(3, 8, 1)).astype("float32")
x[1, 6, 0] = np.inf  # batch 2, the second replica's half only
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(SkipNonFiniteAdam(0.1), "mse")
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).take(1), verbose=0)
before = model.get_weights()[0]
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).skip(1).take(1), verbose=0)
after = model.get_weights()[0]
replicas = [v.numpy() for v in strategy.experimental_local_results(model.weights[0].value)]
print(np.array_equal(before, after), np.array_equal(*replicas),
      int(model.optimizer.nonfinite_steps.numpy()), int(model.optimizer.iterations.numpy()))
"""


def test_nonfinite_gradient_on_one_replica_is_skipped_on_all():
    result = run([sys.executable, "-c", MIRRORED_GUARD])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-4:] == ["True", "True", "1", "2"]


def test_checkpoint_refuses_nonfinite_weights_and_keeps_rng_state(tmp_path):
    config = TransformerConfig.tiny(30, num_layers=1, d_model=16, d_ff=32, num_heads=2)
    from keras_transformer import build_transformer

    model = build_transformer(config)
    directory = str(tmp_path / "checkpoints")
    rng_state = checkpoints.rng_variables(model)
    assert rng_state, "dropout SeedGenerator states are the RNG state to save"
    rng_state[0].assign(np.array([7, 41], dtype="int64"))
    path = checkpoints.save_checkpoint(model, directory, 10, keep=2)
    rng_state[0].assign(np.array([0, 0], dtype="int64"))
    checkpoints.restore_checkpoint(model, path)
    np.testing.assert_array_equal(rng_state[0].numpy(), [7, 41])
    weights = model.get_weights()
    weights[3][0] = np.nan
    model.set_weights(weights)
    with pytest.raises(NonFiniteLossError, match="non-finite weights .* at step 20.*ckpt-00000010"):
        checkpoints.save_checkpoint(model, directory, 20, keep=2)
    assert [step for step, _ in artifacts.list_checkpoints(directory)] == [10]
    assert os.listdir(directory) == ["ckpt-00000010.weights.h5"]  # no partial file left


def test_nonfinite_run_exits_3_and_writes_nothing_from_it(tmp_path):
    write_tsv(tmp_path / "pairs.tsv")
    model_dir = tmp_path / "run"
    command = train_command(tmp_path / "pairs.tsv", model_dir, "--learning-rate-scale", "1e9")
    result = run(command + ["--checkpoint-every-steps", "2", "--export-dir", str(tmp_path / "x")])
    assert result.returncode == 3, result.stderr[-3000:]
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: non-finite loss or gradients at step "), error
    step = int(error.split("at step ")[1].split(":")[0])
    found = artifacts.list_checkpoints(str(model_dir / "checkpoints"))
    assert all(saved < step and all_finite(path) for saved, path in found)
    assert (f"last good checkpoint: {found[-1][1]}" if found else "no checkpoint") in error
    for name in ("final.weights.h5", "summary.json"):
        assert not (model_dir / name).exists()
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_nonfinite_run_resumes_from_last_finite_checkpoint(tmp_path):
    write_tsv(tmp_path / "pairs.tsv")
    model_dir = tmp_path / "run"

    def command(*flags, steps):
        return train_command(tmp_path / "pairs.tsv", model_dir, *flags, steps=steps, every=3)

    assert run(command(steps=6)).returncode == 0
    final = h5_arrays(model_dir / "final.weights.h5")
    # Diverge from step 6 on; no checkpoint is due before the loss blows up.
    diverging = command("--learning-rate-scale", "1e9", "--checkpoint-every-steps", "100", steps=40)
    result = run(diverging)
    assert result.returncode == 3, result.stderr[-3000:]
    assert "ckpt-00000006.weights.h5, rerunning resumes from it" in result.stderr
    assert [s for s, _ in artifacts.list_checkpoints(str(model_dir / "checkpoints"))][-1] == 6
    after = h5_arrays(model_dir / "final.weights.h5")
    assert all(np.array_equal(final[k], after[k]) for k in final)  # untouched
    # Allowing 2 skips: two logged skips, then the third bad batch stops the run.
    result = run(diverging + ["--skip-nonfinite-batches", "2"])
    assert result.returncode == 3, result.stderr[-3000:]
    assert result.stderr.count("batch skipped, no update applied") == 2
    # Back to a sane learning rate: resumes from step 6 and finishes.
    result = run(command(steps=12))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((model_dir / "summary.json").read_text())
    assert summary["resumed_from_step"] == 6 and summary["steps"] == 12
    assert all_finite(model_dir / "final.weights.h5")


# Exact resume ---------------------------------------------------------------------------------


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


def _kill_after_step(command, step, timeout=600):
    """Start `command`, SIGKILL it once its log says `step` is done; returns that step."""
    process = subprocess.Popen(
        command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + timeout
    try:
        for line in process.stderr:
            if f" step {step}/" in line:
                process.send_signal(signal.SIGKILL)
                break
            assert time.monotonic() < deadline, "no progress"
    finally:
        process.kill()
        process.wait()
    assert process.returncode == -signal.SIGKILL
    return step


@pytest.mark.slow
@pytest.mark.parametrize(
    "replicas, accumulate",
    [(1, 1), (2, 1), (1, 2)],
    ids=["one_device", "two_cpu_replicas", "accumulate_2"],
)
def test_kill9_and_rerun_equals_uninterrupted_run(tmp_path, replicas, accumulate):
    write_tsv(tmp_path / "pairs.tsv")
    flags = ["--strategy", "mirrored", "--cpu-replicas", "2"] if replicas == 2 else []
    flags += ["--accumulate-steps", str(accumulate)]
    every, steps = 5, 30
    uninterrupted = train_command(tmp_path / "pairs.tsv", tmp_path / "a", *flags)
    resumed = train_command(tmp_path / "pairs.tsv", tmp_path / "b", *flags)
    assert run(uninterrupted).returncode == 0
    killed_at = _kill_after_step(resumed, random.randint(every + 1, steps - every - 1))
    assert not (tmp_path / "b" / "final.weights.h5").exists()
    result = run(resumed)
    assert result.returncode == 0, result.stderr[-3000:]
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


# Fail early -------------------------------------------------------------------------------------


def test_unwritable_model_dir_is_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cfg = TrainingConfig(model_dir=str(blocker / "run"))
    with pytest.raises(ValueError, match="model_dir is not a writable directory.*file/run"):
        preflight.check_model_dir_writable(cfg.model_dir)


def test_model_dir_of_another_config_or_vocabulary_is_refused(tmp_path):
    write_tsv(tmp_path / "pairs.tsv")
    cfg = TrainingConfig(
        model="tiny", vocab_size=4000, dataset=f"tsv:{tmp_path / 'pairs.tsv'}",
        model_dir=str(tmp_path / "r"),
    )  # fmt: skip
    os.makedirs(cfg.model_dir)
    preflight.save_run_config(cfg)
    from keras_transformer import artifacts

    artifacts.save_config(cfg.model_dir, cfg.model_config(57))
    preflight.check_run(cfg)  # the same run: resumes
    other_model = TrainingConfig(**{**cfg.__dict__, "d_model": 64})
    with pytest.raises(ValueError, match="another config.json.*d_model=128 there, 64 requested"):
        preflight.check_run(other_model)
    other_vocab = TrainingConfig(**{**cfg.__dict__, "vocab_size": 8000})
    with pytest.raises(ValueError, match="another vocabulary: vocab_size=4000 there, vocab_si"):
        preflight.check_run(other_vocab)


def test_corpus_without_a_usable_pair_is_refused(tmp_path):
    (tmp_path / "bad.tsv").write_text("no tab here\n\nthree\ttabs\there\n")
    cfg = TrainingConfig(dataset=f"tsv:{tmp_path / 'bad.tsv'}", model_dir=str(tmp_path / "r"))
    with pytest.raises(ValueError, match=r"no usable 'source<TAB>target' pair .*skipped_no_tab=2"):
        preflight.check_corpus(cfg)


def test_flags_that_contradict_tf_config_are_refused():
    cluster = json.dumps(
        {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker"}}
    )
    assert distribute.strategy_name("auto", environ={"TF_CONFIG": cluster}) == "multi_worker"
    assert distribute.strategy_name("auto", environ={}) == "auto"
    with pytest.raises(ValueError, match="TF_CONFIG describes a cluster but strategy='mirrored'"):
        distribute.strategy_name("mirrored", environ={"TF_CONFIG": cluster})
    with pytest.raises(ValueError, match="strategy='multi_worker' needs TF_CONFIG"):
        distribute.strategy_name("multi_worker", environ={})
    with pytest.raises(ValueError, match="cpu_replicas=2 needs strategy"):
        distribute.strategy_name("one_device", cpu_replicas=2, environ={})
    with pytest.raises(ValueError, match="skip_nonfinite_batches=-1"):
        TrainingConfig(skip_nonfinite_batches=-1)


def test_chief_is_the_chief_task_else_worker_0():
    assert distribute.is_chief_task("chief", 0, ["chief", "worker"])
    assert not distribute.is_chief_task("worker", 0, ["chief", "worker"])
    assert distribute.is_chief_task("worker", 0, ["worker"])
    assert not distribute.is_chief_task("worker", 1, ["worker"])
    assert distribute.is_chief_task(None, None, [])


def test_launcher_cluster_and_command():
    ports = launch.free_ports(3)
    assert len(set(ports)) == 3
    assert launch.cluster_spec(3, ports) == {"worker": [f"127.0.0.1:{p}" for p in ports]}
    with_chief = launch.cluster_spec(3, ports, chief=True)
    assert launch.tasks(with_chief) == [("chief", 0), ("worker", 0), ("worker", 1)]
    assert launch.training_command(["python", "x.py"]) == ["python", "x.py"]
    assert launch.training_command(["--train-steps", "5"])[-2:] == ["--train-steps", "5"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--dataset", "tsv:{tmp}/bad.tsv"], "error: The training split has no usable"),
        (["--model-dir", "{tmp}/file/run"], "error: model_dir is not a writable directory"),
    ],
    ids=["empty_corpus", "unwritable_model_dir"],
)
def test_train_script_prints_one_error_line_with_exit_2(tmp_path, flags, message):
    (tmp_path / "bad.tsv").write_text("no tab here\n")
    (tmp_path / "file").write_text("")
    write_tsv(tmp_path / "pairs.tsv")
    flags = [flag.format(tmp=tmp_path) for flag in flags]
    command = train_command(tmp_path / "pairs.tsv", tmp_path / "run") + flags
    started = time.monotonic()
    result = run(command)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith(message), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 60  # before any training
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_train_script_debug_shows_the_traceback(tmp_path):
    (tmp_path / "bad.tsv").write_text("no tab here\n")
    result = run(train_command(tmp_path / "bad.tsv", tmp_path / "run") + ["--debug"])
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "ValueError: The training split" in result.stderr
