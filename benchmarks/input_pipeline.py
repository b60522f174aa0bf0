"""Padding waste and speed of the training input pipeline (`make_batches`), alone.

    python benchmarks/run.py profile input --model-dir runs/sample_en_de --batches 400

Builds the train batches exactly as `python pipelines/train_wmt.py` does for the run in
`--model-dir` (its `training_config.json` and `spm.model`), pulls `--batches` of them with
no model attached, and reports:

- padding: the share of the source and target slots of the batches that hold padding (each
  bucket pads to its upper length, so every bucket has one shape and the step is traced once
  per bucket), and the share a per-batch pad to the longest sentence would leave;
- speed: batches/s of the pipeline alone, after the first pass filled the cache. Training is
  input-bound only if this is below the steps/s of the train step.
"""

from __future__ import annotations

import json
import os
import time

from benchmarks import flags


def run(args) -> dict:
    import tensorflow as tf

    from keras_transformer.config import TrainingConfig
    from keras_transformer.data import corpus
    from keras_transformer.data.pipeline import make_batches
    from keras_transformer.data.tokenizer import SubwordTokenizer

    with open(os.path.join(args.model_dir, "training_config.json")) as f:
        cfg = TrainingConfig.from_flat(**json.load(f))
    tokenizer = SubwordTokenizer.from_file(os.path.join(args.model_dir, "spm.model"))
    batches = make_batches(
        corpus.load_split(cfg.data, "train"), tokenizer=tokenizer,
        max_length=cfg.architecture.max_length, batch_tokens=cfg.recipe.batch_tokens,
        training=True, seed=cfg.recipe.seed, cache=True,
    )  # fmt: skip
    slots = real = tight = 0
    for inputs, labels in batches.take(args.batches):  # first pass: tokenizes, fills the cache
        for side in (inputs["source"], labels):
            mask = tf.not_equal(side, 0).numpy()  # (rows, bucket_length)
            slots += mask.size
            real += int(mask.sum())
            tight += mask.shape[0] * int(mask.sum(1).max())
    start = time.perf_counter()
    for _ in batches.take(args.batches):
        pass
    seconds = time.perf_counter() - start
    return {
        "model_dir": args.model_dir,
        "batch_tokens": cfg.recipe.batch_tokens,
        "batches": args.batches,
        "padding_share": round(1 - real / slots, 4),
        "padding_share_if_padded_to_longest": round(1 - real / tight, 4),
        "pipeline_batches_per_s": round(args.batches / seconds, 1),
        "real_tokens_per_batch_side": round(real / 2 / args.batches, 1),
    }


def main(argv=None, prog: str = "python benchmarks/run.py profile input") -> None:
    parser = flags.parser(prog, __doc__)
    flags.add(parser, model_dir={"default": "runs/sample_en_de", "help": "a training run"})
    parser.add_argument("--batches", type=int, default=400, help="batches to pull")
    print(json.dumps(run(parser.parse_args(argv))))
