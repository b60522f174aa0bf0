"""Devices and `tf.distribute` strategies for training: one device, MirroredStrategy over the
GPUs (or logical CPUs) of a machine, MultiWorkerMirroredStrategy over machines (TF_CONFIG;
NCCL when the workers have GPUs). XLA is refused on several replicas (`check_jit_compile`).

`MultiWorkerMirroredStrategy` must exist before TensorFlow runs anything else ("Collective ops
must be configured at program startup"), so `create_strategy` is the trainer's first
TensorFlow call. The chief (the `chief` task if the cluster has one, else `worker:0`) alone
writes files; the other workers wait for the files they need (the tokenizer).
"""

from __future__ import annotations

import json
import logging
import os
import time

import tensorflow as tf

logger = logging.getLogger("keras_transformer")


def read_tf_config(environ=None) -> dict | None:
    """The parsed `TF_CONFIG` if it describes a cluster of more than one task, else None."""
    raw = (os.environ if environ is None else environ).get("TF_CONFIG", "").strip()
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}). Received: {raw!r}") from None
    cluster, task = config.get("cluster") or {}, config.get("task") or {}
    tasks = sum(len(addresses) for addresses in cluster.values())
    if tasks <= 1:
        return None
    job, index = task.get("type"), int(task.get("index", 0))
    if job not in cluster or not 0 <= index < len(cluster[job]):
        raise ValueError(f"TF_CONFIG's task is not in its cluster. Received: TF_CONFIG={raw!r}")
    return config


def is_chief_task(task_type: str | None, task_id: int | None, jobs) -> bool:
    """The chief is the `chief` task if the cluster has one, else `worker:0`."""
    if not task_type:
        return True
    if task_type == "chief":
        return True
    return task_type == "worker" and task_id == 0 and "chief" not in set(jobs)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    jobs = resolver.cluster_spec().jobs
    return is_chief_task(resolver.task_type, resolver.task_id, jobs)


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


def strategy_name(name: str, cpu_replicas: int = 0, environ=None) -> str:
    """The strategy a run uses: "auto" becomes "multi_worker" under a TF_CONFIG cluster.

    Raises ValueError for flags that contradict each other or the environment.
    """
    environ = os.environ if environ is None else environ
    cluster = read_tf_config(environ)
    if name == "auto" and cluster is not None:
        name = "multi_worker"
    if name == "multi_worker" and cluster is None:
        raise ValueError(
            "strategy='multi_worker' needs TF_CONFIG describing a cluster of 2 or more tasks "
            "(see BUILD.md, or python -m keras_transformer.training.launch). "
            f"Received: TF_CONFIG={environ.get('TF_CONFIG')!r}"
        )
    if cluster is not None and name != "multi_worker":
        raise ValueError(
            f"TF_CONFIG describes a cluster but strategy={name!r}: use --strategy multi_worker "
            "(or auto), or unset TF_CONFIG"
        )
    if cpu_replicas > 1 and name in ("multi_worker", "one_device"):
        raise ValueError(
            f"cpu_replicas={cpu_replicas} needs strategy 'mirrored' or 'auto'. "
            f"Received: strategy={name!r}"
        )
    return name


# The strategies whose replicas Keras' XLA-compiled train step cannot run (below).
REPLICATED_STRATEGIES = ("mirrored", "multi_worker")


def check_jit_compile(
    strategy: str, jit_compile: bool, cpu_replicas: int = 0, num_gpus: int | None = None
) -> None:
    """Refuse `jit_compile` where the steps run on several replicas: strategy "mirrored" or
    "multi_worker", or "auto" over several GPUs or CPU replicas (`make_strategy`).

    Keras turns XLA off under tf.distribute itself when asked for "auto" (keras#18716, "a
    suspected fundamental incompatibility"); asked for True, Keras 3.15 compiles the
    per-replica step, and under MirroredStrategy over two logical CPUs with a `Dense(1)`
    `fit` fails at the first step ("Trying to access resource .../kernel/replica_1 located
    in device CPU:1 from device CPU:0", as in keras#19005). So it is refused before training.

    Args:
        strategy: the strategy's name after `strategy_name`.
        jit_compile: the run's `--jit-compile`.
        cpu_replicas: the run's `--cpu-replicas`.
        num_gpus: GPUs of this machine (default: TensorFlow's physical GPUs).
    """
    if not jit_compile:
        return
    if strategy == "auto":
        if num_gpus is None:
            num_gpus = len(tf.config.list_physical_devices("GPU"))
        replicas = num_gpus or cpu_replicas
        if replicas <= 1:
            return
        where = f"strategy='auto' (MirroredStrategy over {replicas} devices)"
    elif strategy in REPLICATED_STRATEGIES:
        where = f"strategy={strategy!r}"
    else:
        return
    raise ValueError(
        f"--jit-compile cannot run under --strategy {strategy}: Keras' XLA-compiled step fails "
        "on several replicas (keras#18716, keras#19005); drop --jit-compile, or train on one "
        f"device (--strategy one_device). Received: jit_compile=True, {where}"
    )


def make_strategy(name: str, cpu_replicas: int = 0) -> tf.distribute.Strategy:
    """ "auto": MirroredStrategy over all GPUs (or CPU replicas) if more than one, else default;
    "multi_worker": MultiWorkerMirroredStrategy from TF_CONFIG (`communication_options`)."""
    if name == "multi_worker":
        options = communication_options(len(tf.config.list_physical_devices("GPU")))
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    gpus = tf.config.list_logical_devices("GPU")
    cpus = tf.config.list_logical_devices("CPU")
    devices = [d.name for d in gpus] or ([d.name for d in cpus] if cpu_replicas > 1 else [])
    if name == "mirrored" or (name == "auto" and len(devices) > 1):
        return tf.distribute.MirroredStrategy(devices or None)
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(devices[0] if devices else "/cpu:0")
    return tf.distribute.get_strategy()


def communication_options(num_gpus: int) -> tf.distribute.experimental.CommunicationOptions:
    """MultiWorkerMirroredStrategy's collectives: NCCL between a worker's GPUs and across
    machines when this worker has GPUs (without options TensorFlow picks its gRPC ring); on
    CPUs TensorFlow's own choice (AUTO: the ring, the only CPU implementation)."""
    implementation = tf.distribute.experimental.CommunicationImplementation
    chosen = implementation.NCCL if num_gpus else implementation.AUTO
    return tf.distribute.experimental.CommunicationOptions(implementation=chosen)


def create_strategy(name: str, cpu_replicas: int = 0) -> tf.distribute.Strategy:
    """Devices + strategy, as the first TensorFlow work of the process."""
    name = strategy_name(name, cpu_replicas)
    configure_devices(cpu_replicas)
    return make_strategy(name, cpu_replicas)


def patch_keras_fit_for_multi_worker(model, element_spec) -> None:
    """Work around two bugs that stop Keras 3's `fit` under MultiWorkerMirroredStrategy
    (keras-team/keras#20585, open; Keras 3.15 and its main branch), on this model instance:

    1. Before the first step Keras takes a batch from the distributed iterator and averages it
       over replicas with `strategy.reduce` to build its metrics; on a nested batch that fails
       ("Attempt to convert a value ({'source': PerReplica...}) with an unsupported type
       (<class 'dict'>) to a Tensor"). The build needs only shapes and dtypes: Keras' internal
       `_maybe_symbolic_build` gets them from `element_spec` instead.
    2. It averages each step's logs over workers with `strategy.reduce("MEAN", v, axis=0)`,
       which fails on scalars ("Invalid reduction dimension 0 for input with 0 dimensions"):
       `train_step` and `test_step` return them with shape (1,), which that reduce turns back
       into the scalar mean over replicas that Keras computes under other strategies.
    """
    build = model._maybe_symbolic_build  # TensorFlow backend trainer, internal

    def build_from_spec(iterator=None, data_batch=None):
        build(data_batch=element_spec if data_batch is None else data_batch)

    def with_vector_logs(step):
        def step_with_vector_logs(data):
            return {name: tf.reshape(value, [1]) for name, value in step(data).items()}

        return step_with_vector_logs

    model._maybe_symbolic_build = build_from_spec
    model.train_step = with_vector_logs(model.train_step)
    model.test_step = with_vector_logs(model.test_step)


def wait_for_file(path: str, timeout_s: float = 3600.0, poll_s: float = 1.0) -> None:
    """Block until `path` exists (written by the chief); TimeoutError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    logged = False
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout_s:.0f}s (chief down?)")
        if not logged:
            logger.info("Waiting for the chief to write %s", path)
            logged = True
        time.sleep(poll_s)
