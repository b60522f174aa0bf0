"""Training recipe against independent references: the paper's schedule formula, a NumPy
label-smoothed masked cross-entropy, the token budget of every batch, MirroredStrategy vs one
device, and a killed run that resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.artifacts import list_checkpoints
from keras_transformer.data.pipeline import bucket_batch_sizes, bucket_boundaries, make_batches
from keras_transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.precision import resolve_mixed_precision
from keras_transformer.testing.backends import BACKEND_ENV, require
from keras_transformer.testing.model_dir import TINY_TRAIN_FLAGS
from keras_transformer.testing.runs import write_tsv
from keras_transformer.training.losses import (
    MaskedAccuracy,
    MaskedLabelSmoothedCrossEntropy,
    Perplexity,
    TokenCount,
)
from keras_transformer.training.schedule import TransformerSchedule

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The end-to-end runs below check plumbing (resume, flags, summary), not learning: a one-layer
# d_model 32 model traces its train and decode steps in half the time of the default `quick`
# preset (3 layers, d_model 128): 67 s -> 35 s per 4-step run on a 2-core CPU. Their model:
# TINY_TRAIN_FLAGS.


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_schedule_equals_paper_formula():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    for iteration in [0, 1, 99, 3998, 3999, 4000, 10_000, 99_999]:
        step = iteration + 1
        expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
        got = float(schedule(iteration))
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    # Peak at the end of warm-up, then decay.
    assert float(schedule(3999)) > float(schedule(100)) and float(schedule(3999)) > float(
        schedule(20_000)
    )


def test_cooldown_is_the_formula_times_a_linear_ramp_to_zero():
    schedule = TransformerSchedule(128, 400, scale=0.5, cooldown_steps=500, total_steps=1400)
    iterations = np.arange(0, 1500)
    steps = iterations + 1.0
    formula = 0.5 * 128**-0.5 * np.minimum(steps**-0.5, steps * 400**-1.5)
    expected = formula * np.clip((1400 - steps + 1) / 500, 0, 1)
    got = np.array([float(schedule(i)) for i in iterations])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-12)
    assert got[899] == pytest.approx(formula[899], rel=1e-6)  # step 900: not yet cooling
    assert got[1399] == pytest.approx(formula[1399] / 500, rel=1e-5)  # the last update
    assert got[1400:].max() == 0.0  # past train_steps (a resumed, longer run sets a new total)


def test_schedule_serializes_and_rejects_bad_values():
    schedule = TransformerSchedule(d_model=256, warmup_steps=100, scale=2.0)
    clone = TransformerSchedule.from_config(schedule.get_config())
    assert float(clone(7)) == float(schedule(7))
    cooled = TransformerSchedule(256, 100, cooldown_steps=50, total_steps=300)
    assert float(TransformerSchedule.from_config(cooled.get_config())(280)) == float(cooled(280))
    with pytest.raises(ValueError, match="warmup_steps=0"):
        TransformerSchedule(d_model=256, warmup_steps=0)
    with pytest.raises(ValueError, match="cooldown_steps=50, total_steps=None"):
        TransformerSchedule(256, 100, cooldown_steps=50)
    with pytest.raises(ValueError, match="cooldown_steps=-1"):
        TransformerSchedule(256, 100, cooldown_steps=-1)


def test_training_config_routes_flat_names_to_its_sections():
    """`from_flat` takes the flags' (and `training_config.json`'s) names, `to_flat` gives them
    back, and a run directory's file of any earlier version (flat, possibly without newer
    fields) still loads."""
    from keras_transformer.config import TrainingConfig

    cfg = TrainingConfig.from_flat(model="tiny", train_steps=300, model_dir="r", freeze="encoder")
    assert (cfg.architecture.model, cfg.recipe.train_steps) == ("tiny", 300)
    assert (cfg.run.model_dir, cfg.warm_start.freeze) == ("r", "encoder")
    flat = cfg.to_flat()
    assert len(flat) == len(TrainingConfig.flat_fields()) == 57
    assert TrainingConfig.from_flat(**flat) == cfg
    assert cfg.replace(d_model=64).architecture.d_model == 64
    older = {k: v for k, v in flat.items() if k not in ("decay", "time_budget_minutes", "deliver")}
    assert TrainingConfig.from_flat(**older) == cfg
    with pytest.raises(ValueError, match=r"Unknown TrainingConfig fields: \['steps'\]"):
        TrainingConfig.from_flat(steps=3)
    with pytest.raises(ValueError, match="batch_tokens=64, max_length=128"):
        TrainingConfig.from_flat(batch_tokens=64)  # a check across sections


def test_training_config_cools_down_within_the_run():
    from keras_transformer import TransformerConfig, build_transformer
    from keras_transformer.config import TrainingConfig
    from keras_transformer.training.trainer import compile_model

    with pytest.raises(ValueError, match="cooldown_steps=30, train_steps=20"):
        TrainingConfig.from_flat(train_steps=20, cooldown_steps=30)
    with pytest.raises(ValueError, match="cooldown_steps=-5"):
        TrainingConfig.from_flat(cooldown_steps=-5)
    config = TransformerConfig.tiny(40, num_layers=1, d_model=16, d_ff=32, num_heads=2)
    model = build_transformer(config)
    cfg = TrainingConfig.from_flat(train_steps=20, cooldown_steps=10, warmup_steps=1)
    compile_model(model, config, cfg)
    # The rate the optimizer applies at an iteration, against the formula (warm-up 1: it is
    # d_model^-0.5 * step^-0.5) times the ramp min(1, (20 - step + 1) / 10).
    for iteration, ramp in ((9, 1.0), (14, 0.6), (19, 0.1)):
        model.optimizer.iterations.assign(iteration)
        expected = 16**-0.5 * (iteration + 1) ** -0.5 * ramp
        assert float(model.optimizer.learning_rate) == pytest.approx(expected, rel=1e-5)


def _reference_loss(labels, logits, eps, pad):
    vocab = logits.shape[-1]
    log_probs = _log_softmax(logits.astype(np.float64))
    target = np.eye(vocab)[labels] * (1 - eps) + eps / vocab  # smoothed one-hot
    per_token = -(target * log_probs).sum(-1)
    mask = labels != pad
    return per_token[mask].mean()


def _logits_and_padded_labels(seed, shape, scale, padded_from):
    """Random float32 logits of `shape` (batch, length, vocab) times `scale` and labels in
    [1, vocab), row `r` padded from position `padded_from[r]` on."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=shape).astype("float32") * scale
    labels = rng.integers(1, shape[-1], size=shape[:2])
    for row, start in padded_from.items():
        labels[row, start:] = PAD_ID
    return logits, labels


@pytest.mark.parametrize("one_hot_gradient", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_loss_equals_numpy_reference_with_smoothing_and_padding(eps, one_hot_gradient):
    logits, labels = _logits_and_padded_labels(0, (3, 5, 11), 3.0, {0: 3, 2: 1})
    loss = MaskedLabelSmoothedCrossEntropy(eps, pad_id=PAD_ID, one_hot_gradient=one_hot_gradient)
    got = float(loss(labels, logits))
    np.testing.assert_allclose(got, _reference_loss(labels, logits, eps, PAD_ID), rtol=1e-5)
    # Logits at padded positions do not matter.
    changed = logits.copy()
    changed[labels == PAD_ID] += 100.0
    np.testing.assert_allclose(float(loss(labels, changed)), got, rtol=1e-6)


@pytest.mark.parametrize("one_hot_gradient", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_loss_gradient_is_softmax_minus_smoothed_target(eps, one_hot_gradient):
    """d loss / d logits = (softmax(z) - q) * mask / n_real, q the smoothed one-hot (NumPy)."""
    logits, labels = _logits_and_padded_labels(2, (2, 4, 9), 4.0, {1: 2})
    loss = MaskedLabelSmoothedCrossEntropy(eps, pad_id=PAD_ID, one_hot_gradient=one_hot_gradient)
    _, grad = _loss_and_gradient(loss, labels, logits)
    np.testing.assert_allclose(grad, _numpy_loss_gradient(labels, logits, eps), atol=1e-6)


def _loss_and_gradient(loss, labels, logits):
    import tensorflow as tf

    z = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(z)
        value = loss(labels, z)
    return value.numpy(), tape.gradient(value, z).numpy()


def test_one_hot_gradient_equals_the_scatter_bit_for_bit_and_has_no_scatter():
    """`--deterministic`'s loss (`one_hot_gradient`): the same value and gradient as the
    scatter's, bit for bit, and its traced gradient holds no scatter op, which TensorFlow's
    op determinism would run on the host."""
    import tensorflow as tf

    logits, labels = _logits_and_padded_labels(4, (3, 6, 50), 5.0, {0: 2})
    results, op_types = [], []
    for one_hot in (False, True):
        loss = MaskedLabelSmoothedCrossEntropy(0.1, pad_id=PAD_ID, one_hot_gradient=one_hot)
        results.append(_loss_and_gradient(loss, labels, logits))
        traced = tf.function(lambda z, loss=loss: tf.gradients(loss(labels, z), z)[0])
        graph = traced.get_concrete_function(tf.TensorSpec(logits.shape)).graph
        op_types.append({op.type for op in graph.get_operations()})
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert any("Scatter" in op for op in op_types[0])  # the check sees a scatter
    assert not any("Scatter" in op for op in op_types[1])


def _numpy_loss_gradient(labels, logits, eps):
    """(softmax(z) - q) * mask / n_real in float64, q the smoothed one-hot."""
    z64 = logits.astype(np.float64)
    softmax = np.exp(z64 - z64.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    target = np.eye(logits.shape[-1])[labels] * (1 - eps) + eps / logits.shape[-1]
    mask = (labels != PAD_ID)[..., None]
    return (softmax - target) * mask / mask.sum()


_JAX_LOSS_GRADIENT = """
import sys
import jax
import numpy as np
from keras_transformer.training.losses import MaskedLabelSmoothedCrossEntropy
data = np.load(sys.argv[1])
loss = MaskedLabelSmoothedCrossEntropy(float(data["eps"]), pad_id=int(data["pad"]))
grad = jax.jit(jax.grad(lambda z: loss(data["labels"], z)))(data["logits"])
np.save(sys.argv[2], np.asarray(grad))
"""


def test_loss_gradient_under_the_jax_backend(tmp_path):
    """The written-out gradient (`ops.custom_gradient`) also holds under JAX, the backend of
    the GPU benchmarks: the same NumPy reference as above."""
    require("jax")  # skipped without it, but a failure under CI, as the backend tests
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 4, 9)).astype("float32") * 4
    labels = rng.integers(1, 9, size=(2, 4))
    labels[0, 1:] = PAD_ID
    np.savez(tmp_path / "in.npz", logits=logits, labels=labels, eps=0.1, pad=PAD_ID)
    command = [sys.executable, "-c", _JAX_LOSS_GRADIENT, tmp_path / "in.npz", tmp_path / "grad.npy"]
    result = _run(command, extra_env={"KERAS_BACKEND": "jax", **BACKEND_ENV["jax"]})
    assert result.returncode == 0, result.stderr[-3000:]
    grad = np.load(tmp_path / "grad.npy")
    np.testing.assert_allclose(grad, _numpy_loss_gradient(labels, logits, 0.1), atol=1e-6)


def test_metrics_equal_numpy_reference():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(3, 8, 7)).astype("float32")
    labels = rng.integers(1, 7, size=(3, 8))
    logits[..., PAD_ID] -= 10.0  # the argmax is never PAD, so it can be a label
    right = rng.random(size=labels.shape) < 0.5  # about half right, the rest mostly wrong
    labels = np.where(right, logits.argmax(-1), labels)
    labels[1, 4:] = PAD_ID
    mask = labels != PAD_ID
    log_probs = _log_softmax(logits.astype(np.float64))
    accuracy = MaskedAccuracy()
    accuracy.update_state(labels, logits)
    expected_acc = (log_probs.argmax(-1) == labels)[mask].mean()
    np.testing.assert_allclose(float(accuracy.result()), expected_acc, rtol=1e-6)
    perplexity = Perplexity()
    perplexity.update_state(labels, logits)
    nll = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    np.testing.assert_allclose(float(perplexity.result()), np.exp(nll[mask].mean()), rtol=1e-5)
    tokens = TokenCount()
    tokens.update_state(labels, logits)
    assert float(tokens.result()) == mask.sum()


@pytest.fixture(scope="module")
def spm_tokenizer(tmp_path_factory):
    from keras_transformer.data.tokenizer import SubwordTokenizer, train_sentencepiece

    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 30))) for _ in range(400)]
    path = str(tmp_path_factory.mktemp("spm") / "spm.model")
    train_sentencepiece(texts, path, vocab_size=40)
    return SubwordTokenizer.from_file(path), texts


@pytest.mark.parametrize("num_replicas", [1, 2])
def test_no_batch_exceeds_token_budget(spm_tokenizer, num_replicas):
    tokenizer, texts = spm_tokenizer
    pairs = tf.data.Dataset.from_tensor_slices(
        {"source": texts, "target": [t.upper().lower() for t in reversed(texts)]}
    )
    budget, max_length = 96, 48
    batches = make_batches(
        pairs, tokenizer, max_length, budget, num_replicas=num_replicas, training=True, seed=0
    )
    seen = 0
    for features, labels in batches.take(60):
        source, target = features["source"].numpy(), features["target"].numpy()
        labels = labels.numpy()
        rows = source.shape[0]
        assert rows % num_replicas == 0
        per_replica = rows // num_replicas
        assert per_replica * source.shape[1] <= budget, (source.shape, budget)
        assert per_replica * target.shape[1] <= budget, (target.shape, budget)
        assert source.shape[1] <= max_length and labels.shape[1] <= max_length
        # Decoder input is the target shifted right: BOS + pieces; labels: pieces + EOS.
        assert (target[:, 0] == BOS_ID).all()
        np.testing.assert_array_equal(target[:, 1:][labels[:, :-1] != EOS_ID], labels[:, :-1][
            labels[:, :-1] != EOS_ID
        ])  # fmt: skip
        lengths = (labels != PAD_ID).sum(1)
        assert (labels[np.arange(rows), lengths - 1] == EOS_ID).all()
        seen += 1
    assert seen == 60


def test_bucket_sizes_and_errors():
    boundaries = bucket_boundaries(64)
    assert boundaries == sorted(set(boundaries)) and boundaries[-1] <= 64
    sizes = bucket_batch_sizes(boundaries, 64, 640, num_replicas=2)
    uppers = boundaries + [65]
    for size, upper in zip(sizes, uppers):
        assert (size // 2) * (upper - 1) <= 640 and size % 2 == 0
    with pytest.raises(ValueError, match="batch_tokens=10"):
        bucket_batch_sizes(boundaries, 64, 10)


MIRRORED_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    from keras_transformer.training.trainer import configure_devices
    configure_devices(2)
    import keras
    from keras_transformer import TransformerConfig, build_transformer
    from keras_transformer.config import TrainingConfig
    from keras_transformer.training.trainer import compile_model

    config = TransformerConfig.tiny(32, num_layers=1, d_model=32, d_ff=64, dropout=0.0)
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(6):
        source = rng.integers(4, 32, size=(8, 7)).astype("int32")
        labels = rng.integers(4, 32, size=(8, 6)).astype("int32")
        source[::3, 5:] = 0  # padding, unevenly spread over the two replicas
        labels[1::2, 4:] = 0
        target = np.concatenate([np.full((8, 1), 2, "int32"), labels[:, :-1]], 1)
        batches.append(({"source": source, "target": target}, labels))

    def dataset():
        return tf.data.Dataset.from_generator(
            lambda: iter(batches),
            output_signature=(
                {"source": tf.TensorSpec((None, None), tf.int32),
                 "target": tf.TensorSpec((None, None), tf.int32)},
                tf.TensorSpec((None, None), tf.int32),
            ),
        )

    keras.utils.set_random_seed(0)
    initial = build_transformer(config).get_weights()
    cfg = TrainingConfig.from_flat(warmup_steps=10, batch_tokens=64, max_length=16, average_last=1)
    losses = {}
    strategies = {
        "one_device": tf.distribute.get_strategy(),
        "mirrored": tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]),
    }
    for name, strategy in strategies.items():
        with strategy.scope():
            model = build_transformer(config)
            model.set_weights(initial)
            compile_model(model, config, cfg)
        history = model.fit(dataset(), epochs=6, steps_per_epoch=1, verbose=0)
        losses[name] = history.history["loss"]
        losses[name + "_replicas"] = strategy.num_replicas_in_sync
    print(json.dumps(losses))
    """
)


def _tiny_train_command(tsv, model_dir, *flags: str) -> list[str]:
    """`pipelines/train_wmt.py` on `tsv` into `model_dir` with the tiny model's flags, then
    `flags`."""
    script = os.path.join(REPO, "pipelines", "train_wmt.py")
    return [
        sys.executable, script, "--dataset", f"tsv:{tsv}", "--model-dir", str(model_dir),
        *TINY_TRAIN_FLAGS, *flags,
    ]  # fmt: skip


def _run(script_or_args, timeout=600, extra_env=None, **kwargs):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO, **(extra_env or {}))
    return subprocess.run(
        script_or_args, capture_output=True, text=True, timeout=timeout, env=env, **kwargs
    )


def test_mirrored_strategy_matches_one_device():
    result = _run([sys.executable, "-c", MIRRORED_SCRIPT])
    assert result.returncode == 0, result.stderr[-3000:]
    losses = json.loads(result.stdout.strip().splitlines()[-1])
    assert losses["mirrored_replicas"] == 2 and losses["one_device_replicas"] == 1
    one, mirrored = np.array(losses["one_device"]), np.array(losses["mirrored"])
    assert one[-1] < one[0]  # it trains
    # The loss is the global batch's token mean under both (uneven padding included), so the
    # updates agree up to summation order (tests/test_replicas.py: 8 replicas, the weights).
    np.testing.assert_allclose(mirrored, one, rtol=1e-5)


@pytest.mark.slow  # 14 s; the slow stage's kill -9 tests (test_exact_resume.py) go further
def test_killed_run_resumes_from_checkpoint(tmp_path):
    tsv = tmp_path / "pairs.tsv"
    write_tsv(tsv)
    model_dir = tmp_path / "run"
    flags = [
        "--train-steps", "12", "--steps-per-epoch", "4", "--checkpoint-every-steps", "4",
        "--batch-tokens", "256", "--max-length", "32", "--warmup-steps", "10",
        "--keep-checkpoints", "2", "--average-last", "2", "--eval-limit", "0",
        "--export-dir", "none", "--eval-every-steps", "0",
    ]  # fmt: skip
    command = _tiny_train_command(tsv, model_dir, *flags)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    checkpoint_dir = model_dir / "checkpoints"
    deadline = time.time() + 300
    while time.time() < deadline and process.poll() is None:
        if checkpoint_dir.exists() and list_checkpoints(str(checkpoint_dir)):
            break
        time.sleep(0.2)
    process.kill()
    process.wait()
    done = sorted(p.name for p in checkpoint_dir.glob("ckpt-*.weights.h5"))
    assert done, "the first run wrote no checkpoint before it was killed"
    assert not (model_dir / "final.weights.h5").exists()
    result = _run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((model_dir / "summary.json").read_text())
    assert summary["resumed_from_step"] >= 4
    assert summary["steps"] == 12
    assert len(summary["averaged_checkpoints"]) == 2
    assert len(list(checkpoint_dir.glob("ckpt-*.weights.h5"))) <= 2  # 4, 8, 12: the oldest goes
    assert (model_dir / "final.weights.h5").exists()
    assert list((model_dir / "logs").rglob("events.out.tfevents.*"))


@pytest.mark.slow
def test_tiny_model_learns_reverse_task():
    """A 2-layer model learns to reverse random sequences to > 95% token accuracy."""
    from keras_transformer import TransformerConfig, build_transformer
    from keras_transformer.config import TrainingConfig
    from keras_transformer.training.trainer import compile_model

    vocab, length, batch = 24, 8, 64
    config = TransformerConfig.tiny(vocab, num_layers=2, d_model=64, d_ff=128, dropout=0.0)
    rng = np.random.default_rng(0)

    def make(n):
        source = rng.integers(4, vocab, size=(n, length)).astype("int32")
        labels = np.concatenate([source[:, ::-1], np.full((n, 1), EOS_ID, "int32")], 1)
        target = np.concatenate([np.full((n, 1), BOS_ID, "int32"), labels[:, :-1]], 1)
        return {"source": source, "target": target}, labels

    x, y = make(batch * 300)
    model = build_transformer(config)
    compile_model(model, config, TrainingConfig.from_flat(warmup_steps=200))
    model.fit(x, y, batch_size=batch, epochs=3, verbose=0)
    x_test, y_test = make(512)
    accuracy = MaskedAccuracy()
    accuracy.update_state(y_test, model.predict(x_test, verbose=0))
    assert float(accuracy.result()) > 0.95


def test_average_checkpoints_equals_numpy_mean(tmp_path):
    from keras_transformer import TransformerConfig, artifacts, build_transformer
    from keras_transformer.cli.average_checkpoints import main as average_main
    from keras_transformer.training.checkpoints import save_checkpoint

    config = TransformerConfig.tiny(30, num_layers=1, d_model=16, d_ff=32, num_heads=2)
    model = build_transformer(config)
    artifacts.save_config(str(tmp_path), config)
    rng = np.random.default_rng(0)
    saved = []
    for step in (10, 20, 30, 40):
        weights = [rng.normal(size=w.shape).astype(w.dtype) for w in model.get_weights()]
        model.set_weights(weights)
        save_checkpoint(model, str(tmp_path / "checkpoints"), step, keep=3)
        saved.append(weights)
    assert [s for s, _ in list_checkpoints(str(tmp_path / "checkpoints"))] == [20, 30, 40]
    output = str(tmp_path / "avg.weights.h5")
    assert average_main(["--model-dir", str(tmp_path), "--last", "2", "--output", output]) == 0
    averaged = build_transformer(config)
    averaged.load_weights(output)
    for got, a, b in zip(averaged.get_weights(), saved[2], saved[3]):
        np.testing.assert_allclose(got, (a + b) / 2, rtol=1e-6, atol=1e-7)


ACCUMULATE_2_AUTO = ["--accumulate-steps", "2", "--mixed-precision", "auto"]


@pytest.mark.parametrize(
    "flags",
    [
        ["--mixed-precision", "mixed_bfloat16"],
        # XLA compiles once per bucket shape: about 100 s on a 2-core CPU (one-layer model).
        pytest.param(["--jit-compile"], marks=pytest.mark.slow),
        # The default policy ("auto", which TINY_TRAIN_FLAGS turns off) with accumulation, on
        # one device: one run for both (a separate "auto" run cost about 30 s). Slow since
        # the default stage passed 6 minutes (18 s of it): accumulation's numbers are checked
        # in process (test_accumulation.py), "auto"'s choice in test_precision.py.
        pytest.param(ACCUMULATE_2_AUTO, marks=pytest.mark.slow),
        # The same with two replicas: slow (53-142 s on a 2-core CPU; tracing the mirrored,
        # accumulating step is most of it). The default stage keeps both parts in process:
        # test_mirrored_strategy_matches_one_device and (test_accumulation.py)
        # test_two_replicas_accumulate_like_one_device.
        pytest.param(
            ["--strategy", "mirrored", "--cpu-replicas", "2", *ACCUMULATE_2_AUTO],
            marks=pytest.mark.slow,
        ),
    ],
    ids=["mixed_bfloat16", "xla", "accumulate_2_auto", "mirrored_accumulate_2_auto"],
)
def test_training_flags_run_end_to_end(tmp_path, flags):
    if flags == ["--mixed-precision", "mixed_bfloat16"] and (
        resolve_mixed_precision("auto") == "mixed_bfloat16"
    ):  # a CPU with bfloat16 arithmetic: the "auto" case trains under this same policy
        pytest.skip("'auto' trains under mixed_bfloat16 on this CPU: accumulate_2_auto")
    tsv = tmp_path / "pairs.tsv"
    write_tsv(tsv, n=120)
    model_dir = tmp_path / "run"
    command = _tiny_train_command(
        tsv, model_dir,
        "--train-steps", "4", "--steps-per-epoch", "2", "--checkpoint-every-steps", "2",
        "--batch-tokens", "128", "--max-length", "24", "--warmup-steps", "2",
        "--average-last", "2", "--eval-limit", "4", "--export-dir", "none",
        "--eval-every-steps", "2", "--eval-dev-pairs", "3", "--deliver", "best", *flags,
    )  # fmt: skip
    result = _run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((model_dir / "summary.json").read_text())
    assert summary["steps"] == 4  # updates (8 micro-batches with --accumulate-steps 2)
    names = [f"ckpt-{step:08d}.weights.h5" for step in (2, 4)]
    assert summary["averaged_checkpoints"] == names  # checkpoints count updates too
    assert summary["replicas"] == (2 if "--cpu-replicas" in flags else 1)
    # The policy trained under: "auto" is mixed_bfloat16 on a CPU with bfloat16 arithmetic
    # (no GPU here), float32 elsewhere; TINY_TRAIN_FLAGS's "none" is float32.
    given = flags[flags.index("--mixed-precision") + 1] if "--mixed-precision" in flags else "none"
    policy = resolve_mixed_precision(given)
    assert summary["dtype_policy"] == ("float32" if policy == "none" else policy)
    assert all(np.isfinite(summary["history"]["loss"]))
    from keras_transformer.data.corpus import read_pairs

    expected = len(list(read_pairs(f"tsv:{tsv}", "test", limit=4)))
    assert expected >= 1 and summary["test"]["num_sentences"] == expected
    # Dev BLEU at steps 2 and 4 (under each strategy and policy); the first is always a best,
    # so --deliver best delivers best.weights.h5, which the test score used.
    assert [record["step"] for record in summary["dev_bleu"]] == [2, 4]
    assert summary["weights"] == str(model_dir / "best.weights.h5")
    assert (model_dir / "best.weights.h5").exists()
    assert (model_dir / "learning_curve.png").exists()
    import h5py

    with h5py.File(model_dir / "final.weights.h5") as weights:
        dtypes = set()
        weights.visit(lambda name: dtypes.add(str(getattr(weights[name], "dtype", ""))))
    assert "float32" in dtypes and "bfloat16" not in dtypes  # variables stay float32


def test_compile_model_builds_the_optimizer_outside_the_train_step(tmp_path):
    """Adam's moments exist before the first trace (created inside it, each would add an
    initialization `cond` to the train step's graph), with one m and one v per weight; the
    trainer's `build_and_restore` compiles through it."""
    from keras_transformer.config import TrainingConfig
    from keras_transformer.training import trainer

    sizes = dict(num_layers=1, d_model=16, d_ff=32, num_heads=2)
    cfg = TrainingConfig.from_flat(model_dir=str(tmp_path), **sizes)
    strategy = tf.distribute.get_strategy()
    model, schedule, step = trainer.build_and_restore(
        cfg, cfg.architecture.model_config(50), strategy
    )
    assert step == 0
    assert float(model.optimizer.learning_rate) == pytest.approx(float(schedule(0)))
    assert model.optimizer.built
    weights = model.trainable_variables
    names = [v.name for v in model.optimizer.variables]
    assert sum(name.endswith("_momentum") for name in names) == len(weights) > 0
    assert sum(name.endswith("_velocity") for name in names) == len(weights)


def test_progress_rates_count_only_the_time_inside_updates(caplog):
    """A line's tokens/s is its interval's tokens over the time from each update's begin to
    its end, and the run's figure the same over all updates: a 10 s pause between two updates
    (an evaluation) and the gap before a new epoch count in neither. The cumulative "tokens"
    log restarts every epoch, as Keras resets metrics. The total shows once it is known."""
    import types

    from keras_transformer.training.callbacks import ProgressLog

    clock = iter([0.0, 2.0, 12.0, 13.0, 50.0, 54.0])
    optimizer = types.SimpleNamespace(learning_rate=0.5)
    progress = ProgressLog(log_dir=None, every_steps=2, clock=lambda: next(clock))
    progress.epoch_begins()
    with caplog.at_level("INFO", logger="keras_transformer"):
        for step, cumulative in ((1, 100.0), (2, 300.0)):  # updates of 2 s and 1 s, 10 s apart
            progress.update_begins()
            progress.update_ends(step, {"tokens": cumulative, "loss": 2.0}, None, optimizer)
        progress.epoch_begins()
        for step, cumulative in ((3, 100.0),):  # a 4 s update
            progress.update_begins()
            progress.update_ends(step, {"tokens": cumulative}, 4, optimizer)
    assert progress.total_tokens == 400.0
    assert progress.step_seconds == pytest.approx(7.0)
    assert progress.mean_tokens_per_sec == pytest.approx(400.0 / 7.0)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["step 2 (planning the budget): loss 2.0000, lr 0.5, 100 tokens/s"]
