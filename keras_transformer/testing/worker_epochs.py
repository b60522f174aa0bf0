"""One worker's first epoch of the trainer's training stream, written as JSON: run by every
task of a cluster (`python -m keras_transformer.training.launch --workers 2 -- python -m
keras_transformer.testing.worker_epochs --dataset prepared:DIR --out OUT`) to check what each
worker of a MultiWorkerMirroredStrategy run reads.

Each task creates the strategy as the trainer does, takes the trainer's training stream
(`trainer.training_datasets`: under several workers,
`training.worker_input.file_sharded_batches`) and writes `OUT/worker-<i>.json`: `{"worker",
"workers", "shards", "batches", "rows"}`, `rows` the unpadded label rows of its replica's
batches over the epoch of its own shards (the number of batches the manifest's histograms
give them).
"""

from __future__ import annotations

import argparse
import json
import os

import tensorflow as tf

from keras_transformer.config import TrainingConfig
from keras_transformer.constants import PAD_ID
from keras_transformer.data import prepared
from keras_transformer.data import prepared_manifest as manifests
from keras_transformer.data.pipeline import bucket_layout
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.training import trainer
from keras_transformer.training.distribute import create_strategy


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, help="prepared:DIR")
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch-tokens", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    args = parser.parse_args(argv)
    strategy = create_strategy("multi_worker")
    cfg = TrainingConfig.from_flat(
        dataset=args.dataset, batch_tokens=args.batch_tokens, max_length=args.max_length
    )
    manifest = manifests.load(args.dataset)
    tokenizer = SubwordTokenizer.from_file(os.path.join(manifest.directory, "spm.model"))
    resolver = strategy.cluster_resolver  # a cluster of workers only, no chief task
    worker, workers = resolver.task_id, resolver.cluster_spec().num_tasks("worker")
    shards = prepared.worker_shards(manifest, worker, workers)
    boundaries, sizes = bucket_layout(args.max_length, args.batch_tokens, 1, True)
    batches = sum(
        prepared.shard_batch_count(manifest.shards[i], boundaries, sizes, args.max_length)
        for i in shards
    )
    train, _ = trainer.training_datasets(cfg, tokenizer, strategy.num_replicas_in_sync, 0, strategy)
    iterator, rows = iter(train), []
    for _ in range(batches):
        _, labels = next(iterator)
        for replica in strategy.experimental_local_results(labels):
            rows += [[int(i) for i in row if i != PAD_ID] for row in replica.numpy()]
    record = dict(worker=worker, workers=workers, shards=shards, batches=batches, rows=rows)
    with open(os.path.join(args.out, f"worker-{worker}.json"), "w") as f:
        json.dump(record, f)
    tf.print("worker", worker, "of", workers, "read shards", shards, "batches", batches)


if __name__ == "__main__":
    main()
