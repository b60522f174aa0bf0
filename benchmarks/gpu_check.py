"""GPU check: the paper's base recipe for a few hundred steps on every visible GPU
(MirroredStrategy), in bfloat16 and in float16, before anyone pays for a long run.

    python benchmarks/run.py gpu check                     # all GPUs, 300 updates a precision
    python benchmarks/run.py gpu check --steps 500 --peak-tflops 989 --json /tmp/gpu.json
    python benchmarks/run.py gpu check --allow-cpu --steps 3 --config tiny   # CPU smoke mode

The config is the recipe's (`--recipe`, default paper_base_en_de) resolved for this machine
(`keras_transformer.recipes`: the paper's 25000 tokens an update as batch per replica x
replicas x accumulated micro-batches), with the model's vocabulary (37000) but batches of the
bundled En-De corpus (news sentences: WMT-like lengths) cut by an 8000-piece SentencePiece
model trained once into --work-dir. For each precision it prints:

- step time: seconds an update, after --warmup updates (the traces of the bucket shapes);
- MFU: model FLOPs an update (`recipes.train_flops`: 6 x parameters x real tokens, plus
  attention's two products) / step time / (GPUs x peak): --peak-tflops, else the GPU's dense
  16-bit peak in `recipes.GPU_KINDS` (none known: no MFU);
- loss-scale events: updates skipped as non-finite (the optimizer's `nonfinite_steps`), as
  float16 overflows (`loss_scale_skips`) and the loss scale at the end;
- checkpoint write time: one `training.checkpoints.save_checkpoint` (weights, Adam slots and
  the finiteness check on the host) and its size;
- input headroom: batches/s the tf.data pipeline yields alone over the batches/s the steps
  take (below 1: the run waits for its input).

Without a GPU visible to TensorFlow it says so and exits with status 2, unless --allow-cpu.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from benchmarks import flags

PRECISIONS = ("mixed_bfloat16", "mixed_float16")
NO_GPU = (
    "gpu check: TensorFlow sees no GPU (tf.config.list_physical_devices('GPU') is empty): "
    "nothing to check. A CPU smoke run of this script: --allow-cpu --steps 3 --config tiny"
)


def build_parser(prog: str | None):
    parser = flags.parser(prog, __doc__)
    parser.add_argument("--recipe", default="paper_base_en_de", help="(default: %(default)s)")
    parser.add_argument(
        "--config", default="base", choices=("quick", "tiny", "base", "big"),
        help="architecture preset (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=300, help="timed updates a precision")
    parser.add_argument(
        "--warmup", type=int, help="updates before the timing (default: 30; CPU: 1)"
    )
    parser.add_argument(
        "--precisions", default=",".join(PRECISIONS), help="comma-separated dtype policies"
    )
    parser.add_argument("--peak-tflops", type=float, help="one GPU's peak (default: table)")
    parser.add_argument("--batch-tokens", type=int, help="per replica (default: the recipe's)")
    parser.add_argument("--accumulate-steps", type=int, help="(default: the recipe's)")
    parser.add_argument("--vocab-size", type=int, help="model vocabulary (default: recipe's)")
    parser.add_argument("--probe-batches", type=int, default=200, help="input pipeline alone")
    parser.add_argument(
        "--work-dir", default=os.path.join(tempfile.gettempdir(), "keras_transformer_gpu_check"),
        help="tokenizer and checkpoint (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument("--allow-cpu", action="store_true", help="run without a GPU (smoke)")
    parser.add_argument("--json", help="also write the results to this file")
    return parser


def run_config(args, devices):
    """The recipe resolved for `devices`, the flags given winning; a CPU smoke run takes
    1024-token batches without accumulation unless told otherwise."""
    from keras_transformer import recipes

    given = {"model": args.config}
    for name in ("batch_tokens", "accumulate_steps", "vocab_size"):
        if getattr(args, name) is not None:
            given[name] = getattr(args, name)
    if not devices.gpus:
        given = {"batch_tokens": 1024, "accumulate_steps": 1, **given}
    return recipes.complete(recipes.resolve(args.recipe, devices, **given))


def tokenizer(work_dir: str, vocab_size: int = 8000):
    """The bundled corpus's SentencePiece model in `work_dir`, trained on first use."""
    from keras_transformer.config import DataConfig
    from keras_transformer.data import corpus
    from keras_transformer.data.tokenizer import SubwordTokenizer, train_sentencepiece

    path = os.path.join(work_dir, "spm.model")
    if not os.path.exists(path):
        os.makedirs(work_dir, exist_ok=True)
        pairs = corpus.read_split(DataConfig(), "train")
        train_sentencepiece((s for pair in pairs for s in pair), path, vocab_size=vocab_size)
    return SubwordTokenizer.from_file(path)


def batches(cfg, spm, replicas: int):
    from keras_transformer.config import DataConfig
    from keras_transformer.data import corpus
    from keras_transformer.data.pipeline import make_batches

    return make_batches(
        corpus.load_split(DataConfig(), "train"), tokenizer=spm,
        max_length=cfg.architecture.max_length, batch_tokens=cfg.recipe.batch_tokens,
        num_replicas=replicas, training=True, seed=cfg.recipe.seed,
    )  # fmt: skip


def probe_input(dataset, count: int) -> dict:
    """Batches/s of the pipeline alone (after one batch: the shuffle buffer filled), and the
    real (non-padding) tokens a side and padded length of its batches."""
    import numpy as np

    iterator = iter(dataset)
    next(iterator)
    real, length, start = 0.0, 0.0, time.perf_counter()
    for _ in range(count):
        inputs, labels = next(iterator)
        source, target = inputs["source"].numpy(), labels.numpy()
        real += (np.count_nonzero(source) + np.count_nonzero(target)) / 2
        length += (source.shape[1] + target.shape[1]) / 2
    seconds = time.perf_counter() - start
    return {"batches_per_s": count / seconds, "tokens": real / count, "length": length / count}


def update_timer(first: int, last: int, accumulate: int):
    """A callback noting the wall time at the end of updates `first` and `last` (batch
    `u x accumulate`), synchronized by reading the loss there only: no other batch waits."""
    import keras

    class UpdateTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.marks = {}

        def on_train_batch_end(self, batch, logs=None):
            update, rest = divmod(batch + 1, accumulate)
            if not rest and update in (first, last):
                float(logs["loss"])  # waits for the update
                self.marks[update] = time.perf_counter()

    return UpdateTimer()


def optimizer_events(optimizer) -> dict:
    """Skipped updates (non-finite: `nonfinite_steps`; overflows of float16's loss scale:
    `loss_scale_skips`) and the loss scale at the end (None without loss scaling), from
    `training.optimizer.GuardedAccumulatingAdam`."""
    import keras

    found = {}
    for name in ("nonfinite_steps", "loss_scale_skips"):
        value = getattr(optimizer, name, None)
        if value is not None:
            found[name] = int(keras.ops.convert_to_numpy(value))
    scale = getattr(optimizer, "loss_scale", None) if optimizer.loss_scaling else None
    found["loss_scale"] = float(keras.ops.convert_to_numpy(scale)) if scale is not None else None
    return found


def check_precision(policy: str, cfg, devices, spm, args) -> dict:
    """Train `args.warmup + args.steps` updates under `policy`; the figures of one row."""
    import keras
    import tensorflow as tf

    from keras_transformer import recipes
    from keras_transformer.model import build_transformer
    from keras_transformer.training import checkpoints
    from keras_transformer.training.trainer import compile_model

    try:
        cfg = cfg.replace(mixed_precision=policy)
    except ValueError as error:  # a combination the trainer refuses
        return {"precision": policy, "skipped": str(error)}
    keras.backend.clear_session()
    keras.mixed_precision.set_dtype_policy(policy)
    strategy = tf.distribute.MirroredStrategy() if devices.gpus else tf.distribute.get_strategy()
    replicas, accumulate = strategy.num_replicas_in_sync, cfg.recipe.accumulate_steps
    config = cfg.architecture.model_config()
    with strategy.scope():
        model = build_transformer(config)
        compile_model(model, config, cfg)
    data = batches(cfg, spm, replicas)
    probe = probe_input(data, args.probe_batches)
    first = args.warmup or (30 if devices.gpus else 1)
    last = first + args.steps
    timer = update_timer(first, last, accumulate)
    model.fit(
        data, epochs=1, steps_per_epoch=last * accumulate, callbacks=[timer], shuffle=False,
        verbose=0,
    )  # fmt: skip
    step = (timer.marks[last] - timer.marks[first]) / args.steps
    started = time.perf_counter()
    path = checkpoints.save_checkpoint(model, os.path.join(args.work_dir, policy), last, keep=1)
    write = time.perf_counter() - started
    keras.mixed_precision.set_dtype_policy("float32")
    flops = recipes.train_flops(config, probe["tokens"] * accumulate, probe["length"])
    peak = args.peak_tflops or (devices.gpu.peak_tflops if devices.gpus else None)
    return {
        "precision": policy,
        "replicas": replicas,
        "batch_tokens": cfg.recipe.batch_tokens,
        "accumulate_steps": accumulate,
        "step_seconds": step,
        "target_tokens_per_s": probe["tokens"] * accumulate / step,
        "mfu": flops / step / (max(devices.gpus, 1) * peak * 1e12) if peak else None,
        **optimizer_events(model.optimizer),
        "checkpoint_seconds": write,
        "checkpoint_mb": os.path.getsize(path) / 2**20,
        "input_batches_per_s": probe["batches_per_s"],
        "input_headroom": probe["batches_per_s"] * step / accumulate,
    }


def describe(row: dict) -> str:
    if "skipped" in row:
        return f"{row['precision']}: skipped: {row['skipped']}"
    mfu = f"MFU {row['mfu']:.2f}" if row["mfu"] is not None else "MFU unknown (--peak-tflops)"
    return (
        f"{row['precision']}: {row['step_seconds']:.4g} s an update ({row['replicas']} replicas "
        f"x {row['batch_tokens']} tokens x {row['accumulate_steps']}), "
        f"{row['target_tokens_per_s']:.0f} target tokens/s, {mfu}; skipped updates "
        f"{row.get('nonfinite_steps', 'n/a')} non-finite, {row.get('loss_scale_skips', 'n/a')} "
        f"loss-scale overflows, loss scale {row['loss_scale']}; checkpoint "
        f"{row['checkpoint_seconds']:.2f} s ({row['checkpoint_mb']:.0f} MB); input pipeline "
        f"{row['input_batches_per_s']:.1f} batches/s alone, headroom {row['input_headroom']:.1f}x"
    )


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = build_parser(prog).parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    from keras_transformer import logging_utils

    logging_utils.import_tensorflow_quietly()
    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU") and not args.allow_cpu:
        print(NO_GPU, file=sys.stderr)
        return 2
    from keras_transformer import recipes
    from keras_transformer.cli.train import local_devices

    devices = local_devices()
    cfg = run_config(args, devices)
    for line in recipes.device_lines(cfg, devices):
        print(line)
    spm = tokenizer(args.work_dir)
    rows = []
    for policy in args.precisions.split(","):
        rows.append(check_precision(policy, cfg, devices, spm, args))
        print(describe(rows[-1]), flush=True)
    print(json.dumps(rows))
    flags.write_json({"rows": rows, "devices": devices.describe()}, args.json)
    return 0
