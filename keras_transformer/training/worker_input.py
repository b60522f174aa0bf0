"""FILE sharding of a prepared corpus under MultiWorkerMirroredStrategy: each worker reads,
buckets and batches only its own shards (`data.prepared.worker_shards`), instead of the
whole stream of which `AutoShardPolicy.DATA` keeps 1/W.

    train = file_sharded_batches(strategy, cfg, tokenizer, start_batch=skip)
    model.fit(train, ...)  # a DistributedDataset: Keras distributes it no further

What changes versus one worker (and versus DATA sharding, which splits each global batch of
the one-worker stream over the replicas): each replica's batch is a batch of its worker's own
stream, cut for one replica (`batch_tokens` tokens at most), so a step's global batch is made
of the workers' own batches, which may come from different length buckets; a worker's local
replicas take consecutive batches of its stream. Each worker's stream is the one-worker
stream's rule (module docstring of `data.prepared`) applied to its shards: its epochs are its
shards, permuted per epoch, and they differ from the other workers' in length by the batches
of their shards (with a shard count that is not a multiple of the workers, by whole shards:
a warning says so). Together the workers' epochs hold the examples of a one-worker,
one-replica run's epoch (the same batch sizes, the same remainders left out per shard).
On resume at micro-batch b, every worker seeks to batch `b * local replicas` of its own
stream. Fewer shards than workers is refused (ValueError naming both): falling back to DATA
would hand every worker the whole corpus again, the cost this sharding removes, while
preparing with a smaller `--examples-per-shard` fixes it for good.
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.config import TrainingConfig
from keras_transformer.data import prepared
from keras_transformer.data.tokenizer import SubwordTokenizer


def file_sharded_batches(
    strategy: tf.distribute.Strategy,
    cfg: TrainingConfig,
    tokenizer: SubwordTokenizer,
    start_batch: int,
) -> tf.distribute.DistributedDataset:
    """The training stream of `cfg`'s prepared corpus under `strategy`, each worker on its own
    shards from its micro-batch `start_batch` on (the module docstring): elements
    `({"source", "target"} (replica batch, length), labels (replica batch, length))` per
    replica."""

    def worker_batches(context: tf.distribute.InputContext) -> tf.data.Dataset:
        local_replicas = context.num_replicas_in_sync // context.num_input_pipelines
        return prepared.training_batches(
            cfg,
            tokenizer,
            num_replicas=1,
            start_batch=start_batch * local_replicas,
            worker=context.input_pipeline_id,
            num_workers=context.num_input_pipelines,
        )

    return strategy.distribute_datasets_from_function(worker_batches)


def replica_element_spec(dataset) -> object:
    """The element spec of one replica's batch: `dataset.element_spec` for a `tf.data.Dataset`
    (the global batch, the same structure), the first replica's spec of a DistributedDataset
    (whose spec is a `PerReplicaSpec` per tensor; `_value_specs`, its per-replica specs, has
    no public accessor in TF 2.21)."""
    if isinstance(dataset, tf.data.Dataset):
        return dataset.element_spec

    def first_replica(spec):
        return spec._value_specs[0] if hasattr(spec, "_value_specs") else spec

    return tf.nest.map_structure(first_replica, dataset.element_spec)
