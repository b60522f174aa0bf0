"""Fine-tuning and warm starts: `--init-from RUN` continues the parent (same spm.model bytes,
architecture and loss), `--vocab` reuses a SentencePiece model, `--freeze` leaves a part of the
model untouched, and every conflict is refused before training with both values named.

One 36-step parent run (a one-layer model on a 300-line TSV corpus) is shared by the module.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.cli import train as train_cli
from keras_transformer.config import TrainingConfig, TransformerConfig
from keras_transformer.model import build_transformer
from keras_transformer.testing.model_dir import TINY_TRAIN_FLAGS
from keras_transformer.testing.runs import run, write_tsv
from keras_transformer.training import trainer, warm_start
from keras_transformer.training.losses import MaskedLabelSmoothedCrossEntropy
from keras_transformer.training.schedule import TransformerSchedule

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(REPO, "pipelines", "train_wmt.py")
PARENT_STEPS = 36
PARENT_SIZES = [*TINY_TRAIN_FLAGS, "--max-length", "32"]


def command(tsv, model_dir, *flags, steps):
    """A training command without dev BLEU, test evaluation or export; the loss of every step
    goes to TensorBoard (`step_scalars`). Float32 on every machine: losses are compared with
    a float32 recomputation (`first_batch_loss`)."""
    return [
        sys.executable, TRAIN, "--dataset", f"tsv:{tsv}", "--model-dir", str(model_dir),
        "--mixed-precision", "none",
        "--batch-tokens", "256", "--train-steps", str(steps), "--steps-per-epoch", "6",
        "--checkpoint-every-steps", "6", "--keep-checkpoints", "1", "--average-last", "1",
        "--eval-limit", "0", "--export-dir", "none", "--eval-every-steps", "0",
        "--log-every-steps", "1", *flags,
    ]  # fmt: skip


def step_scalars(model_dir, tag) -> dict[int, float]:
    """`{step: value}` of a scalar `ProgressLog` wrote to MODEL_DIR/logs/steps."""
    values = {}
    for path in tf.io.gfile.glob(os.path.join(str(model_dir), "logs", "steps", "events.*")):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag == tag:
                    values[event.step] = float(tf.make_ndarray(value.tensor))
    return values


def h5_weights(path) -> dict[str, np.ndarray]:
    """The model weights (not the optimizer's) of a `.weights.h5` file, by layer path."""
    arrays = {}
    with h5py.File(path, "r") as f:
        f["layers"].visititems(
            lambda name, obj: (
                arrays.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return arrays


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    """A finished 36-step run: `(model_dir, tsv)`."""
    root = tmp_path_factory.mktemp("warm_start")
    write_tsv(root / "pairs.tsv")
    flags = [*PARENT_SIZES, "--warmup-steps", "10"]
    result = run(command(root / "pairs.tsv", root / "parent", *flags, steps=PARENT_STEPS))
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "parent", root / "pairs.tsv"


def first_batch_loss(model_dir, weights) -> float:
    """The loss of `weights` on the first training batch of the run in `model_dir`."""
    cfg = TrainingConfig.from_flat(**json.loads((model_dir / "training_config.json").read_text()))
    model, config, tokenizer = artifacts.load_trained(str(model_dir), str(weights))
    keras.utils.set_random_seed(cfg.recipe.seed)  # as the run: the shuffle reads the global seed
    train_data, _ = trainer.training_datasets(cfg, tokenizer, num_replicas=1)
    features, labels = next(iter(train_data))
    loss = MaskedLabelSmoothedCrossEntropy(cfg.architecture.label_smoothing, pad_id=config.pad_id)
    return float(loss(labels, model(features, training=False)))


def test_init_from_continues_the_parent(parent, tmp_path, caplog):
    """The child starts from the parent's weights: same vocabulary bytes, same config, and its
    first-step loss is the parent's last, not a fresh model's."""
    parent_dir, tsv = parent
    child = tmp_path / "child"
    flags = ["--init-from", str(parent_dir), "--learning-rate-scale", "0.5", "--warmup-steps", "2"]
    result = run(command(tsv, child, *flags, "--freeze", "encoder", steps=6))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (child / "spm.model").read_bytes() == (parent_dir / "spm.model").read_bytes()
    assert "SentencePiece model (" not in result.stderr  # copied, not trained
    # Flags left at their defaults (--vocab-size 4000, --max-length 128, ...) took the parent's.
    assert artifacts.load_config(str(child)) == artifacts.load_config(str(parent_dir))

    parent_losses, child_losses = step_scalars(parent_dir, "loss"), step_scalars(child, "loss")
    fresh_first = parent_losses[1]  # a fresh model on the same first batch (same seed and data)
    parent_last = parent_losses[PARENT_STEPS]  # the mean over its last epoch (6 steps)
    child_first = child_losses[1]
    gap = fresh_first - parent_last  # about 2.4 nats: 4.84 -> 2.44
    assert gap > 1.0, parent_losses
    # One batch's loss scatters by about +-0.5 around the epoch mean at the parent's end (its
    # step 34 moved the running mean from 2.35 to 2.51), so a quarter of the gap (~0.6) is as
    # tight as a one-batch comparison allows; a fresh or barely trained model is far outside.
    assert abs(child_first - parent_last) < 0.25 * gap, (child_first, parent_last, fresh_first)
    # Exactly: the child's first loss is the parent's final weights' loss on that batch.
    expected = first_batch_loss(child, parent_dir / "final.weights.h5")
    np.testing.assert_allclose(child_first, expected, rtol=1e-4)
    # A fresh optimizer: the child's own schedule from step 0 (lr logged after update 1).
    expected_lr = float(TransformerSchedule(32, warmup_steps=2, scale=0.5)(1))
    np.testing.assert_allclose(step_scalars(child, "lr")[1], expected_lr, rtol=1e-5)

    # --freeze encoder: the encoder's weights are the parent's, everything else trained.
    before = h5_weights(parent_dir / "final.weights.h5")
    after = h5_weights(child / "final.weights.h5")
    encoder = [name for name in before if name.startswith("encoder/")]
    assert encoder and all(np.array_equal(before[n], after[n]) for n in encoder)
    others = [name for name in before if name not in encoder]
    assert all(not np.array_equal(before[n], after[n]) for n in others if before[n].ndim == 2)
    total = sum(a.size for a in before.values())
    trainable = total - sum(before[n].size for n in encoder)
    assert f"({total:,} parameters, {trainable:,} trainable)" in result.stderr

    summary = json.loads((child / "summary.json").read_text())
    assert summary["init_from"] == str(parent_dir) and summary["steps"] == 6

    # A rerun (here: its model set-up) resumes from the child's checkpoint, not the parent's.
    argv = command(tsv, child, *flags, "--freeze", "encoder", steps=8)[2:]
    rerun = warm_start.resolve(train_cli.training_config(train_cli.build_parser().parse_args(argv)))
    with caplog.at_level(logging.INFO, logger="keras_transformer"):
        strategy = tf.distribute.get_strategy()
        _, _, step = trainer.build_and_restore(rerun, rerun.architecture.model_config(), strategy)
    assert step == 6 and "Resumed from" in caplog.text, caplog.text
    assert "Initialized from" not in caplog.text


def test_vocab_reuses_a_sentencepiece_model(parent, tmp_path, caplog):
    """`--vocab`: the file is copied (no SentencePiece training) and sets the vocabulary size."""
    parent_dir, tsv = parent
    spm = parent_dir / "spm.model"
    requested = TrainingConfig.from_flat(
        dataset=f"tsv:{tsv}", model_dir=str(tmp_path / "run"), vocab=str(spm), d_model=64
    )
    cfg = warm_start.resolve(requested)
    architecture = cfg.architecture  # the file's size; a new architecture
    assert architecture.vocab_size == 60 and architecture.d_model == 64
    os.makedirs(cfg.run.model_dir)
    with caplog.at_level(logging.INFO, logger="keras_transformer"):
        tokenizer = trainer.prepare_tokenizer(cfg)
    assert (tmp_path / "run" / "spm.model").read_bytes() == spm.read_bytes()
    assert "copied, no SentencePiece training" in caplog.text
    assert "SentencePiece model (" not in caplog.text
    assert tokenizer.vocab_size == architecture.model_config(tokenizer.vocab_size).vocab_size == 60
    assert warm_start.resolve(requested) == cfg  # a rerun: the same spm.model is accepted


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--config", "base"], "num_layers=1 there, 6 requested (model='base'), d_model=32 "),
        (["--d-model", "64"], "d_model=32 there, 64 requested (d_model=64)"),
        (["--vocab-size", "100"], "vocab_size=60 there, 100 requested (vocab_size=100)"),
    ],
    ids=["preset", "d_model", "vocab_size"],
)
def test_incompatible_init_from_is_refused_with_exit_2(parent, tmp_path, capsys, flags, message):
    parent_dir, tsv = parent
    argv = command(tsv, tmp_path / "child", "--init-from", str(parent_dir), *flags, steps=6)[2:]
    assert train_cli.main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"error: init_from={str(parent_dir)!r} holds another architecture")
    assert message in error, error
    assert not (tmp_path / "child").exists()  # refused before anything was written


def test_init_from_names_a_missing_file(parent, tmp_path):
    parent_dir, _ = parent
    unfinished = tmp_path / "unfinished"
    (unfinished / "checkpoints").mkdir(parents=True)
    for name in ("spm.model", "config.json", "training_config.json"):
        shutil.copy(parent_dir / name, unfinished / name)
    cfg = TrainingConfig.from_flat(init_from=str(unfinished), model_dir=str(tmp_path / "child"))
    with pytest.raises(ValueError, match=r"init_from needs .*unfinished/final.weights.h5, which"):
        warm_start.resolve(cfg)
    # One of its checkpoints instead: the run directory is the checkpoint directory's parent.
    checkpoint = unfinished / "checkpoints" / "ckpt-00000036.weights.h5"
    shutil.copy(parent_dir / "final.weights.h5", checkpoint)
    from_checkpoint = cfg.replace(init_from=str(checkpoint))
    child = warm_start.resolve(from_checkpoint)
    sizes = child.architecture
    assert (sizes.vocab_size, sizes.d_model, sizes.max_length) == (60, 32, 32)
    os.remove(unfinished / "spm.model")
    with pytest.raises(ValueError, match=r"init_from needs .*unfinished/spm.model, which"):
        warm_start.resolve(from_checkpoint)


def test_vocabulary_conflicts_are_refused(parent, tmp_path):
    from keras_transformer.data.tokenizer import train_sentencepiece

    parent_dir, _ = parent
    spm = str(parent_dir / "spm.model")
    model_dir = str(tmp_path / "run")

    def resolve(**fields):
        return warm_start.resolve(TrainingConfig.from_flat(model_dir=model_dir, **fields))

    with pytest.raises(ValueError, match=r"has 60 pieces, vocab_size=100 requested"):
        resolve(vocab=spm, vocab_size=100)
    other = train_sentencepiece(["red green blue house tree"] * 50, str(tmp_path / "o.model"), 20)
    with pytest.raises(ValueError, match=r"differs from vocab=.*o.model"):
        resolve(init_from=str(parent_dir), vocab=other)
    os.makedirs(model_dir)
    shutil.copy(other, os.path.join(model_dir, "spm.model"))
    with pytest.raises(ValueError, match=r"holds another spm.model than .*parent/spm.model"):
        resolve(vocab=spm)
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["red green blue"] * 50), model_prefix=str(tmp_path / "plain"),
        vocab_size=12, minloglevel=2,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"special ids \{'pad_id': -1, 'unk_id': 0"):
        resolve(vocab=str(tmp_path / "plain.model"))
    with pytest.raises(ValueError, match=r"vocab must be a SentencePiece .model file. .*nope"):
        resolve(vocab=str(tmp_path / "nope.model"))


def test_resuming_with_another_freeze_is_refused(tmp_path):
    cfg = TrainingConfig.from_flat(model_dir=str(tmp_path))
    (tmp_path / "training_config.json").write_text(json.dumps(cfg.to_flat()))
    assert warm_start.resolve(cfg) == cfg  # no checkpoint yet: anything goes
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "ckpt-00000006.weights.h5").write_bytes(b"")
    with pytest.raises(ValueError, match="trained with freeze=None, freeze='encoder' requested"):
        warm_start.resolve(TrainingConfig.from_flat(model_dir=str(tmp_path), freeze="encoder"))


@pytest.mark.parametrize("part", ["encoder", "embeddings"])
def test_frozen_weights_do_not_change(part):
    config = TransformerConfig.quick(
        40, num_layers=1, d_model=16, d_ff=32, num_heads=2, share_embeddings=False
    )
    model = build_transformer(config)
    warm_start.freeze(model, part)
    trainer.compile_model(model, config, TrainingConfig.from_flat(warmup_steps=2))
    model.run_eagerly = True  # three steps: tracing would cost more than running them
    frozen = {
        "encoder": model.encoder.weights,
        "embeddings": model.token_embedding.weights + model.source_embedding.weights,
    }[part]
    frozen_ids = {id(w) for w in frozen}
    before = {id(w): keras.ops.convert_to_numpy(w) for w in model.weights}
    rng = np.random.default_rng(0)
    source = rng.integers(4, 40, size=(8, 7)).astype("int32")
    labels = rng.integers(4, 40, size=(8, 6)).astype("int32")
    target = np.concatenate([np.full((8, 1), 2, "int32"), labels[:, :-1]], 1)
    model.fit({"source": source, "target": target}, labels, epochs=3, verbose=0)
    for weight in model.weights:
        unchanged = np.array_equal(before[id(weight)], keras.ops.convert_to_numpy(weight))
        assert unchanged == (id(weight) in frozen_ids), (part, weight.path)
    frozen_size = sum(int(np.prod(w.shape)) for w in frozen)
    assert warm_start.trainable_count(model) == model.count_params() - frozen_size > 0


def test_warm_start_fields_are_flags_and_validated():
    parser = train_cli.build_parser()
    args = parser.parse_args(["--init-from", "runs/a", "--vocab", "a.model", "--freeze", "encoder"])
    cfg = train_cli.training_config(args)
    start = cfg.warm_start
    assert (start.init_from, start.vocab, start.freeze) == ("runs/a", "a.model", "encoder")
    with pytest.raises(SystemExit):
        parser.parse_args(["--freeze", "decoder"])
    with pytest.raises(ValueError, match=r"freeze must be one of .*Received: freeze='decoder'"):
        TrainingConfig.from_flat(freeze="decoder")
    with pytest.raises(
        ValueError, match="init_from must be a path or None. Received: init_from=''"
    ):
        TrainingConfig.from_flat(init_from="")
