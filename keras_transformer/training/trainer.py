"""The training run: parallel text -> shared SentencePiece vocabulary -> token-budget batches ->
`model.fit` under a `tf.distribute` strategy -> checkpoints -> averaged final weights (test
BLEU, `summary.json` and the export are `keras_transformer.runner`'s).

    summary = train(TrainingConfig.from_flat(model="tiny", train_steps=1200))

A run killed at any point and restarted with the same arguments resumes from its latest
checkpoint (model, optimizer and dropout RNG state; the data stream skips the batches already
trained on) and stops at exactly `train_steps` updates; with `deterministic=True` its weights
equal an uninterrupted run's. A non-finite loss or gradient raises `NonFiniteLossError`
before anything is saved from it. Bad flags, an unwritable or foreign model directory and an
empty corpus raise ValueError before TensorFlow starts. Under a TF_CONFIG cluster only the
chief writes files (see `keras_transformer.training.distribute`).
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any

import keras
import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.config import TrainingConfig, TransformerConfig
from keras_transformer.data import corpus, prepared
from keras_transformer.data import prepared_manifest as manifests
from keras_transformer.data.pipeline import make_batches, through_data_service
from keras_transformer.data.tokenizer import SubwordTokenizer, train_sentencepiece
from keras_transformer.precision import (
    gpu_compute_capabilities,
    resolve_mixed_precision,
)
from keras_transformer.training import (
    checkpoints,
    guided_alignment,
    preflight,
    regularization,
    warm_start,
)
from keras_transformer.training.budget import BudgetPlanner, EndOfRun, Plan, process_start_time
from keras_transformer.training.callbacks import PeriodicCheckpoint, ProgressLog
from keras_transformer.training.distribute import (  # noqa: F401  (re-exported)
    configure_devices,
    create_strategy,
    is_chief,
    is_chief_task,
    make_strategy,
    patch_keras_fit_for_multi_worker,
    read_tf_config,
    wait_for_file,
)
from keras_transformer.training.errors import WorkerLostError
from keras_transformer.training.losses import (
    MaskedAccuracy,
    MaskedLabelSmoothedCrossEntropy,
    Perplexity,
    TokenCount,
)
from keras_transformer.training.nonfinite import (  # noqa: F401  (re-exported)
    NonFiniteGuard,
    NonFiniteLossError,
    check_finite,
)
from keras_transformer.training.optimizer import INITIAL_LOSS_SCALE, GuardedAccumulatingAdam
from keras_transformer.training.preemption import SignalWatch
from keras_transformer.training.run_control import Evaluator, RunControl
from keras_transformer.training.run_end import RunEnd
from keras_transformer.training.schedule import TransformerSchedule
from keras_transformer.training.worker_input import file_sharded_batches, replica_element_spec

logger = logging.getLogger("keras_transformer")
TOKENIZER_SENTENCES = 400_000  # pairs read to train the shared vocabulary


def prepare_tokenizer(cfg: TrainingConfig, chief: bool = True) -> SubwordTokenizer:
    """Train the shared vocabulary on the training split, copy `init_from`'s or `vocab`, or
    reuse the model_dir's. Only the chief writes it (atomically); other workers wait for it."""
    path = artifacts.path(cfg.run.model_dir, artifacts.TOKENIZER_FILE)
    if not os.path.exists(path) and not chief:
        wait_for_file(path)
    elif not os.path.exists(path):
        existing = warm_start.vocabulary_source(cfg)
        if existing:
            warm_start.copy_vocabulary(existing, path)
        else:
            _train_vocabulary(cfg, path)
    return SubwordTokenizer.from_file(path)


def _train_vocabulary(cfg: TrainingConfig, path: str) -> None:
    """SentencePiece BPE on both sides of the training split, written atomically to `path`."""

    def sentences():
        for source, target in corpus.read_split(cfg.data, "train", limit=TOKENIZER_SENTENCES):
            yield source
            yield target

    partial = os.path.join(cfg.run.model_dir, f".partial-{os.getpid()}-spm.model")
    train_sentencepiece(sentences(), partial, vocab_size=cfg.architecture.vocab_size)
    os.replace(partial, path)


def compile_model(
    model: keras.Model, config: TransformerConfig, cfg: TrainingConfig
) -> TransformerSchedule:
    """Compile with the paper's Adam, schedule and loss (and the token metrics), and build the
    optimizer's variables for the model's trainable weights. Returns the schedule."""
    schedule = TransformerSchedule(
        config.d_model,
        cfg.recipe.warmup_steps,
        cfg.recipe.learning_rate_scale,
        cooldown_steps=cfg.recipe.cooldown_steps,
        total_steps=cfg.step_limit(),
        decay=cfg.resolved_decay(),
    )
    pad = config.pad_id
    adam = dict(beta_1=0.9, beta_2=0.98, epsilon=1e-9)  # paper, section 5.3
    # mixed_float16 (the model's policy, "auto" resolved): the optimizer scales the loss itself,
    # with one finiteness decision for all replicas and workers; `auto_scale_loss=False` keeps
    # compile from wrapping Keras' LossScaleOptimizer (its decision is per replica) around it.
    float16 = model.dtype_policy.name == "mixed_float16"
    optimizer = GuardedAccumulatingAdam(
        schedule, **adam, accumulate_steps=cfg.recipe.accumulate_steps,
        initial_loss_scale=INITIAL_LOSS_SCALE if float16 else None,
    )  # fmt: skip
    model.compile(
        optimizer=optimizer,
        loss=MaskedLabelSmoothedCrossEntropy(
            config.label_smoothing, pad_id=pad, one_hot_gradient=cfg.distribution.deterministic
        ),
        metrics=[MaskedAccuracy(pad), Perplexity(pad), TokenCount(pad)],
        jit_compile=cfg.distribution.jit_compile,
        auto_scale_loss=False,
    )
    # Eagerly, not inside the first trace of the train step: created there, each of the
    # optimizer's variables gets an initialization `cond` in the traced graph, which slows the
    # first step (benchmarks/results/2026-11-25-benchmarks-history.md, "Start-up and the
    # accuracy metric": the first step of `python pipelines/train_wmt.py` before and after).
    model.optimizer.build(model.trainable_variables)
    return schedule


def training_datasets(cfg, tokenizer, num_replicas, skip_batches=0, strategy=None):
    """`(train, dev)` datasets: train from batch `skip_batches` on, read from a prepared corpus
    (a seek: `data.prepared`; under MultiWorkerMirroredStrategy each worker on its own shards,
    a DistributedDataset: `training.worker_input`) or tokenized on the fly (a replay); dev
    None if empty."""
    common = dict(
        tokenizer=tokenizer,
        max_length=cfg.architecture.max_length,
        batch_tokens=cfg.recipe.batch_tokens,
        num_replicas=num_replicas,
        cache=not corpus.uses_tfds(cfg.data.dataset),  # WMT's millions of pairs stay streamed
    )
    service = cfg.data.data_service
    guided_alignment.check_input(cfg.recipe, cfg.data, prepared=manifests.is_prepared(
        cfg.data.dataset))  # fmt: skip
    if service and not (
        manifests.is_prepared(cfg.data.dataset) or corpus.uses_tfds(cfg.data.dataset)
    ):
        raise ValueError(
            "The tf.data service runs graph-only input pipelines: prepare the corpus "
            "(keras-transformer-prepare-data) and train on prepared:DIR. Received: "
            f"dataset={cfg.data.dataset!r}, data_service={service!r}"
        )
    if manifests.is_prepared(cfg.data.dataset) and _multi_worker(strategy) and not service:
        train = file_sharded_batches(strategy, cfg, tokenizer, skip_batches)
    elif manifests.is_prepared(cfg.data.dataset):
        train = prepared.training_batches(cfg, tokenizer, num_replicas, skip_batches)
    else:
        train = make_batches(
            guided_alignment.training_pairs(cfg.data, cfg.recipe),
            training=True,
            seed=cfg.recipe.seed,
            skip_batches=skip_batches,
            **common,
        )
    if service:
        logger.info("Training batches from the tf.data service at %s", service)
        train = through_data_service(train, service)
    dev = make_batches(corpus.load_split(cfg.data, "dev"), training=False, **common)
    num_dev_batches = int(dev.reduce(0, lambda count, _: count + 1))
    if num_dev_batches == 0:
        logger.warning(
            "The dev split (%s) has no pair within max_length: no validation",
            cfg.data.split_dataset("dev")[0],
        )
        return train, None
    # A known length keeps Keras from warning "input ran out of data" after each dev pass.
    dev = dev.apply(tf.data.experimental.assert_cardinality(num_dev_batches))
    return train, dev


def _multi_worker(strategy) -> bool:
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def _run_control(
    cfg: TrainingConfig, chief: bool, strategy, schedule, evaluator, end_of_run
) -> RunControl:
    """The run's one callback (`training.run_control`) and its parts."""
    run = cfg.run
    checkpoint_dir = artifacts.path(run.model_dir, artifacts.CHECKPOINT_DIR)
    planner = None
    if cfg.planned():  # the budget counts from the process's start
        plan_path = artifacts.path(run.model_dir, artifacts.PLAN_FILE)
        planner = BudgetPlanner(
            cfg.budget_seconds(), process_start_time(), schedule, plan_path, end_of_run
        )
    log_dir = artifacts.path(run.model_dir, artifacts.LOG_DIR)
    multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    return RunControl(
        RunEnd(cfg.step_limit(), cfg.time_limit_seconds(), planner),
        PeriodicCheckpoint(
            checkpoint_dir, every_steps=run.checkpoint_every_steps,
            every_minutes=run.checkpoint_every_minutes, keep=run.keep_checkpoints,
            is_chief=chief, run=_run_description(cfg, strategy.num_replicas_in_sync),
        ),
        SignalWatch(run.preemption_grace_seconds),
        guard=NonFiniteGuard(
            run.skip_nonfinite_batches, lambda: artifacts.latest_checkpoint_in(checkpoint_dir)
        ),
        progress=ProgressLog(os.path.join(log_dir, "steps") if chief else None,
                             run.log_every_steps),
        evaluator=evaluator if chief else None,
        strategy=strategy if multi_worker else None,
    )  # fmt: skip


def _run_description(cfg: TrainingConfig, replicas: int) -> dict[str, int | str]:
    """What a checkpoint records of the run: replicas, micro-batches per update, the padded
    tokens an update sees at most (the global batch) and the dtype policy (`cfg`'s, resolved
    by `_start`); a resume checks the first, second and last (`preflight.check_resume`)."""
    recipe = cfg.recipe
    return {
        "replicas": replicas,
        "accumulate_steps": recipe.accumulate_steps,
        "batch_tokens_per_replica": recipe.batch_tokens,
        "global_batch_tokens": replicas * recipe.accumulate_steps * recipe.batch_tokens,
        "precision": cfg.distribution.mixed_precision,
    }


def build_and_restore(cfg, config, strategy) -> tuple[keras.Model, TransformerSchedule, int]:
    """Build and compile under the strategy; resume from the latest checkpoint if any, else
    start from `init_from`'s weights if set. Returns the model, its learning-rate schedule
    and the step it starts from."""
    with strategy.scope():
        model = guided_alignment.build_model(config, cfg.recipe)
        latest = artifacts.latest_checkpoint(cfg.run.model_dir)
        if latest is None and cfg.warm_start.init_from is not None:
            # Before compile: no optimizer state.
            warm_start.load_parent_weights(model, cfg.warm_start.init_from)
        warm_start.freeze(model, cfg.warm_start.freeze)
        schedule = compile_model(model, config, cfg)
        if latest is not None:
            checkpoints.restore_checkpoint(model, latest)
            logger.info("Resumed from %s", latest)
    return model, schedule, int(model.optimizer.iterations.numpy())


def finish(model: keras.Model, cfg: TrainingConfig, chief: bool) -> list[str]:
    """Average the last `average_last` checkpoints into `final.weights.h5` (chief only)."""
    checkpoint_dir = artifacts.path(cfg.run.model_dir, artifacts.CHECKPOINT_DIR)
    found = artifacts.list_checkpoints(checkpoint_dir)
    paths = [path for _, path in found[-cfg.run.average_last :]]
    if not chief:
        return paths
    if paths:
        checkpoints.average_checkpoints(model, paths)
    step = int(model.optimizer.iterations.numpy())
    check_finite(model.weights, step, artifacts.latest_checkpoint_in(checkpoint_dir))
    final = artifacts.path(cfg.run.model_dir, artifacts.FINAL_WEIGHTS)
    model.save_weights(final, overwrite=True)
    return paths


def _start(cfg: TrainingConfig) -> tuple[TrainingConfig, tf.distribute.Strategy, bool]:
    """Checks without TensorFlow, then the strategy as TensorFlow's first work, then seeds and
    the dtype policy. Returns `cfg` with "auto" precision resolved (what the run trains
    under: compiled, saved and checked at a resume), the strategy and whether this is the
    chief."""
    cluster = read_tf_config()
    task = (cluster or {}).get("task", {})
    jobs = (cluster or {}).get("cluster", {})
    chief = is_chief_task(task.get("type"), int(task.get("index", 0)), jobs)
    preflight.check_run(cfg, chief)
    devices = cfg.distribution
    strategy = create_strategy(devices.strategy, devices.cpu_replicas)
    if devices.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(cfg.recipe.seed)  # before any tokenizer: reseeding drops it
    policy = resolve_mixed_precision(devices.mixed_precision, gpu_compute_capabilities())
    logger.info("Dtype policy: %s (--mixed-precision %s)", policy, devices.mixed_precision)
    if policy != "none":
        keras.mixed_precision.set_dtype_policy(policy)
    return cfg.replace(mixed_precision=policy), strategy, is_chief(strategy)


def train(
    cfg: TrainingConfig,
    evaluator: Evaluator | None = None,
    end_of_run: EndOfRun | None = None,
) -> dict[str, Any]:
    """Run (or resume) training as configured and average the last checkpoints into the final
    weights; returns the run's figures (the caller writes `summary.json`:
    `keras_transformer.runner.Runner`).

    Training does not decode: the caller hands down its dev evaluation (`evaluator`, run in
    the chief's process only, every `evaluator.every_steps` updates and at the end; under
    MultiWorkerMirroredStrategy an early stop it asks for stops every worker after the same
    update). A run planned to a time budget keeps time for `end_of_run` (default: averaging
    only), the work after training (`training.budget.EndOfRun`)."""
    cfg = warm_start.resolve(cfg)  # init_from's architecture, vocab's size (files only)
    cfg = regularization.with_quick_preset_dropout(cfg)
    cfg, strategy, chief = _start(cfg)
    model, schedule, tokenizer, start_step = _prepare(cfg, strategy, chief)
    replicas = strategy.num_replicas_in_sync
    # Checkpoints are written at update boundaries only: update u is micro-batch u * K.
    skip = start_step * cfg.recipe.accumulate_steps
    train_data, dev_data = training_datasets(cfg, tokenizer, replicas, skip, strategy)
    started = time.perf_counter()
    history, control = None, None
    if start_step < _target_steps(cfg):
        control = _run_control(cfg, chief, strategy, schedule, evaluator, end_of_run or EndOfRun())
        callbacks = [control]
        if chief:  # after the run control, which takes the token counter out of the logs
            log_dir = artifacts.path(cfg.run.model_dir, artifacts.LOG_DIR)
            callbacks.append(keras.callbacks.TensorBoard(log_dir, update_freq="epoch"))
        history = _fit(model, strategy, cfg, train_data, dev_data, callbacks, start_step)
    train_seconds = time.perf_counter() - started
    averaged = finish(model, cfg, chief)
    return _summary(
        cfg, model, chief=chief, replicas=replicas, start_step=start_step,
        train_seconds=train_seconds, control=control, history=history, averaged=averaged,
    )  # fmt: skip


def _prepare(cfg: TrainingConfig, strategy, chief: bool):
    """`(model, schedule, tokenizer, start step)`: the run's files written (chief), its
    tokenizer, its model built and restored under `strategy`."""
    latest = artifacts.latest_checkpoint(cfg.run.model_dir)
    if latest is not None:  # before anything of the run in model_dir changes
        current = _run_description(cfg, strategy.num_replicas_in_sync)
        preflight.check_resume(latest, checkpoints.checkpoint_run(latest), current)
    if chief:
        preflight.save_run_config(cfg)
    tokenizer = prepare_tokenizer(cfg, chief)
    preflight.check_same_run(cfg, tokenizer.vocab_size)
    config = cfg.architecture.model_config(tokenizer.vocab_size)
    if chief:
        artifacts.save_config(cfg.run.model_dir, config)
    model, schedule, start_step = build_and_restore(cfg, config, strategy)
    replicas, recipe = strategy.num_replicas_in_sync, cfg.recipe
    logger.info(
        "Training %s (%s parameters, %s trainable) on %s with %d replica(s) x %d tokens x %d "
        "micro-batch(es): global batch up to %d tokens per update", cfg.architecture.model,
        f"{model.count_params():,}", f"{warm_start.trainable_count(model):,}", cfg.data.dataset,
        replicas, recipe.batch_tokens, recipe.accumulate_steps,
        _run_description(cfg, replicas)["global_batch_tokens"],
    )  # fmt: skip
    return model, schedule, tokenizer, start_step


def _summary(
    cfg, model, *, chief, replicas, start_step, train_seconds, control, history, averaged
) -> dict[str, Any]:
    """The figures of a finished training (the start of `summary.json`); `control`: the
    run's `RunControl`, None when there was nothing left to train."""
    run_end = control.run_end if control else None
    progress = control.progress if control else None
    return {
        "dataset": cfg.data.dataset,
        "model": cfg.architecture.model,
        "parameters": model.count_params(),
        "replicas": replicas,
        "dtype_policy": keras.config.dtype_policy().name,
        "chief": chief,
        "resumed_from_step": start_step,
        "init_from": cfg.warm_start.init_from,
        "steps": int(model.optimizer.iterations.numpy()),
        "nonfinite_steps_skipped": _optimizer_count(model, "nonfinite_steps"),
        "loss_scale_skips": _optimizer_count(model, "loss_scale_skips"),  # float16 only
        "train_seconds": round(train_seconds, 1),
        "time_limit_seconds": cfg.time_limit_seconds(),
        "stopped_by": run_end.stopped_by if run_end else None,
        "stopped_by_time_limit": _stopped_by_time_limit(cfg, run_end, model),
        "plan": _plan_summary(cfg, run_end),
        # Over the time inside updates, all of them: a progress line's interval swings by
        # +-15% on a shared CPU and would make the run's figure a sample.
        "tokens_per_sec": round(progress.mean_tokens_per_sec, 1) if progress else None,
        "step_seconds": round(progress.step_seconds, 1) if progress else None,
        "averaged_checkpoints": [os.path.basename(p) for p in averaged],
        "history": {k: [float(x) for x in v] for k, v in getattr(history, "history", {}).items()},
    }


def _target_steps(cfg: TrainingConfig) -> int:
    """The run's last step: the recorded plan's, else `step_limit()`."""
    plan = _recorded_plan(cfg) if cfg.planned() else None
    return plan.total_steps if plan is not None else cfg.step_limit()


def _recorded_plan(cfg: TrainingConfig) -> Plan | None:
    """The plan recorded in `MODEL_DIR/plan.json`, or None."""
    return Plan.load(artifacts.path(cfg.run.model_dir, artifacts.PLAN_FILE))


def _plan_summary(cfg: TrainingConfig, run_end: RunEnd | None) -> dict | None:
    """What summary.json records of a planned run: its budget, plans and how it stopped."""
    if not cfg.planned():
        return None
    plan = _recorded_plan(cfg)
    by_budget = run_end is not None and run_end.stopped_by == "budget"
    return {
        "budget_seconds": cfg.budget_seconds(),
        "total_steps": plan.total_steps if plan else None,
        "plans": len(plan.segments) if plan else 0,
        "stopped_by_budget_at_step": run_end.stopped_at_step if by_budget else None,
    }


def _stopped_by_time_limit(cfg: TrainingConfig, run_end: RunEnd | None, model) -> bool:
    """Whether the time limit ended training before its last step: this process's own, or
    (on the chief of a multi-worker run) another worker's, the one stop that a worker other
    than the chief decides."""
    limited = cfg.time_limit_seconds() is not None
    steps = int(model.optimizer.iterations.numpy())
    if run_end is None or not limited or steps >= _target_steps(cfg):
        return False
    return run_end.stopped_by in ("time_limit", "another_worker")


def _fit(model, strategy, cfg, train_data, dev_data, callbacks, start_step):
    """`model.fit` from `start_step` to the run's last step, Keras' own printing off (the
    progress log is `callbacks.ProgressLog`); under MultiWorkerMirroredStrategy a lost peer
    becomes `WorkerLostError`."""
    multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    if multi_worker:
        patch_keras_fit_for_multi_worker(model, replica_element_spec(train_data))
    epoch = cfg.run.steps_per_epoch
    try:
        return model.fit(
            train_data,
            validation_data=dev_data,
            epochs=math.ceil(cfg.step_limit() / epoch),
            initial_epoch=start_step // epoch,
            steps_per_epoch=epoch * cfg.recipe.accumulate_steps,  # Keras counts batches
            callbacks=callbacks,
            shuffle=False,  # make_batches shuffles; Keras would only warn that it cannot
            verbose=0,
        )
    except (tf.errors.UnavailableError, tf.errors.AbortedError) as error:
        if not multi_worker:
            raise
        step = int(model.optimizer.iterations.numpy())
        latest = artifacts.latest_checkpoint(cfg.run.model_dir)
        logger.info("TensorFlow's message: %s", error)
        cluster = (read_tf_config() or {}).get("cluster")
        raise WorkerLostError(step, latest, str(error), cluster) from error


def _optimizer_count(model: keras.Model, name: str) -> int | None:
    """The optimizer's counter `name` (`nonfinite_steps`, `loss_scale_skips`), None if none."""
    counter = getattr(model.optimizer, name, None)
    return int(keras.ops.convert_to_numpy(counter)) if counter is not None else None
