"""The training run: parallel text -> shared SentencePiece vocabulary -> token-budget batches ->
`model.fit` under a `tf.distribute` strategy -> checkpoints -> averaged final weights -> BLEU.

    summary = train(TrainingConfig(model="tiny", dataset="sample_en_de", train_steps=1200))

A run killed at any point and restarted with the same arguments resumes from its latest
checkpoint (model and optimizer state) and stops at exactly `train_steps` updates.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from typing import Any

import keras
import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.config import TrainingConfig, TransformerConfig
from keras_transformer.data import corpus
from keras_transformer.data.pipeline import make_batches
from keras_transformer.data.tokenizer import SubwordTokenizer, train_sentencepiece
from keras_transformer.model import build_transformer
from keras_transformer.training import callbacks as cb
from keras_transformer.training import checkpoints
from keras_transformer.training.losses import (
    MaskedAccuracy,
    MaskedLabelSmoothedCrossEntropy,
    Perplexity,
    TokenCount,
)
from keras_transformer.training.schedule import TransformerSchedule

logger = logging.getLogger("keras_transformer")
TOKENIZER_SENTENCES = 400_000  # pairs read to train the shared vocabulary


def configure_devices(cpu_replicas: int) -> None:
    """Split the CPU into `cpu_replicas` logical devices (call before any TF op runs)."""
    if cpu_replicas <= 1:
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_replicas
        )
    except RuntimeError as error:
        raise RuntimeError(
            f"cpu_replicas={cpu_replicas} must be set before TensorFlow initializes its devices"
        ) from error


def make_strategy(name: str, cpu_replicas: int = 0) -> tf.distribute.Strategy:
    """ "auto": MirroredStrategy over all GPUs (or CPU replicas) if more than one, else default."""
    gpus = tf.config.list_logical_devices("GPU")
    cpus = tf.config.list_logical_devices("CPU")
    devices = [d.name for d in gpus] or ([d.name for d in cpus] if cpu_replicas > 1 else [])
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored" or (name == "auto" and len(devices) > 1):
        return tf.distribute.MirroredStrategy(devices or None)
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(devices[0] if devices else "/cpu:0")
    return tf.distribute.get_strategy()


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker" and resolver.task_id == 0
    )


def prepare_tokenizer(cfg: TrainingConfig) -> SubwordTokenizer:
    """Train the shared vocabulary on the training split, or reuse the model_dir's."""
    path = artifacts.path(cfg.model_dir, artifacts.TOKENIZER_FILE)
    if not os.path.exists(path):

        def sentences():
            for source, target in corpus.read_pairs(
                cfg.dataset, "train", data_dir=cfg.data_dir, limit=TOKENIZER_SENTENCES
            ):
                yield source
                yield target

        train_sentencepiece(sentences(), path, vocab_size=cfg.vocab_size)
    return SubwordTokenizer.from_file(path)


def compile_model(model: keras.Model, config: TransformerConfig, cfg: TrainingConfig) -> None:
    schedule = TransformerSchedule(config.d_model, cfg.warmup_steps, cfg.learning_rate_scale)
    pad = config.pad_id
    model.compile(
        optimizer=keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=MaskedLabelSmoothedCrossEntropy(config.label_smoothing, pad_id=pad),
        metrics=[MaskedAccuracy(pad), Perplexity(pad), TokenCount(pad)],
        jit_compile=cfg.jit_compile,
    )


def _datasets(cfg, tokenizer, num_replicas):
    common = dict(
        tokenizer=tokenizer,
        max_length=cfg.max_length,
        batch_tokens=cfg.batch_tokens,
        num_replicas=num_replicas,
        cache=not cfg.dataset.startswith("wmt"),  # WMT's millions of pairs stay streamed
    )
    train = make_batches(
        corpus.load_corpus(cfg.dataset, "train", data_dir=cfg.data_dir),
        training=True,
        seed=cfg.seed,
        **common,
    )
    dev = make_batches(
        corpus.load_corpus(cfg.dataset, "dev", data_dir=cfg.data_dir), training=False, **common
    )
    num_dev_batches = int(dev.reduce(0, lambda count, _: count + 1))
    if num_dev_batches == 0:
        logger.warning(
            "The dev split of %s has no pair within max_length: no validation", cfg.dataset
        )
        return train, None
    if num_replicas == 1:
        # A known length keeps Keras from warning "input ran out of data" after each dev pass.
        # Not with several replicas: tf.distribute may split a last partial batch differently.
        dev = dev.apply(tf.data.experimental.assert_cardinality(num_dev_batches))
    return train, dev


def _callbacks(cfg: TrainingConfig, chief: bool) -> list[keras.callbacks.Callback]:
    log_dir = artifacts.path(cfg.model_dir, artifacts.LOG_DIR)
    return [
        cb.TrainingMonitor(os.path.join(log_dir, "steps"), cfg.log_every_steps),
        cb.PeriodicCheckpoint(
            artifacts.path(cfg.model_dir, artifacts.CHECKPOINT_DIR),
            every_steps=cfg.checkpoint_every_steps,
            every_minutes=cfg.checkpoint_every_minutes,
            keep=cfg.keep_checkpoints,
            is_chief=chief,
        ),
        cb.StopAtStep(cfg.train_steps),
        keras.callbacks.TensorBoard(log_dir, update_freq="epoch"),
        keras.callbacks.TerminateOnNaN(),
    ]


def build_and_restore(cfg, config, strategy) -> tuple[keras.Model, int]:
    """Build and compile under the strategy; resume from the latest checkpoint if any."""
    with strategy.scope():
        model = build_transformer(config)
        compile_model(model, config, cfg)
        latest = artifacts.latest_checkpoint(cfg.model_dir)
        if latest is not None:
            checkpoints.restore_checkpoint(model, latest)
            logger.info("Resumed from %s", latest)
    return model, int(model.optimizer.iterations.numpy())


def finish(model: keras.Model, cfg: TrainingConfig, chief: bool) -> list[str]:
    """Average the last `average_last` checkpoints into `final.weights.h5`."""
    found = checkpoints.list_checkpoints(artifacts.path(cfg.model_dir, artifacts.CHECKPOINT_DIR))
    paths = [path for _, path in found[-cfg.average_last :]]
    if paths:
        checkpoints.average_checkpoints(model, paths)
    if chief:
        model.save_weights(artifacts.path(cfg.model_dir, artifacts.FINAL_WEIGHTS), overwrite=True)
    return paths


def train(cfg: TrainingConfig, evaluate: bool = True) -> dict[str, Any]:
    """Run (or resume) training as configured; returns the run's summary (also saved as
    `summary.json` in the model directory)."""
    configure_devices(cfg.cpu_replicas)
    keras.utils.set_random_seed(cfg.seed)  # before any tokenizer exists: reseeding drops it
    if cfg.mixed_precision != "none":
        keras.mixed_precision.set_dtype_policy(cfg.mixed_precision)
    strategy = make_strategy(cfg.strategy, cfg.cpu_replicas)
    replicas = strategy.num_replicas_in_sync
    chief = is_chief(strategy)
    os.makedirs(cfg.model_dir, exist_ok=True)
    tokenizer = prepare_tokenizer(cfg)
    config = cfg.model_config(tokenizer.vocab_size)
    artifacts.save_config(cfg.model_dir, config)
    model, start_step = build_and_restore(cfg, config, strategy)
    logger.info(
        "Training %s (%s parameters) on %s with %d replica(s), %d tokens per replica batch",
        cfg.model, f"{model.count_params():,}", cfg.dataset, replicas, cfg.batch_tokens,
    )  # fmt: skip
    train_data, dev_data = _datasets(cfg, tokenizer, replicas)
    started = time.perf_counter()
    history, monitor = None, None
    if start_step < cfg.train_steps:
        callbacks = _callbacks(cfg, chief)
        monitor = callbacks[0]
        history = model.fit(
            train_data,
            validation_data=dev_data,
            epochs=math.ceil(cfg.train_steps / cfg.steps_per_epoch),
            initial_epoch=start_step // cfg.steps_per_epoch,
            steps_per_epoch=cfg.steps_per_epoch,
            callbacks=callbacks,
            verbose=1 if chief else 0,
        )
    train_seconds = time.perf_counter() - started
    averaged = finish(model, cfg, chief)
    summary = {
        "dataset": cfg.dataset,
        "model": cfg.model,
        "parameters": model.count_params(),
        "replicas": replicas,
        "resumed_from_step": start_step,
        "steps": int(model.optimizer.iterations.numpy()),
        "train_seconds": round(train_seconds, 1),
        "tokens_per_sec": round(monitor.tokens_per_sec, 1) if monitor else None,
        "averaged_checkpoints": [os.path.basename(p) for p in averaged],
        "history": {
            k: [float(x) for x in v] for k, v in (history.history if history else {}).items()
        },
    }
    if evaluate and cfg.eval_limit != 0:
        summary["test"] = evaluate_test_split(model, tokenizer, config, cfg)
    if chief:
        with open(artifacts.path(cfg.model_dir, artifacts.SUMMARY_FILE), "w") as f:
            json.dump(summary, f, indent=2)
    return summary


def evaluate_test_split(model, tokenizer, config, cfg: TrainingConfig) -> dict[str, Any]:
    """BLEU/chrF of the final weights on the test split (beam search, paper settings)."""
    from keras_transformer.config import SearchOptions
    from keras_transformer.decoding.evaluation import evaluate_bleu

    pairs = list(
        corpus.read_pairs(cfg.dataset, "test", data_dir=cfg.data_dir, limit=cfg.eval_limit)
    )
    output = artifacts.path(cfg.model_dir, "test.hyp.txt")
    search = SearchOptions(beam_size=cfg.eval_beam_size, alpha=cfg.eval_alpha)
    return evaluate_bleu(model, tokenizer, pairs, search, output_path=output)
