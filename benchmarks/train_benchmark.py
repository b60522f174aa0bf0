"""Training throughput: target tokens/s of `model.fit` steps on synthetic token-budget batches.

    python benchmarks/run.py train fit --config tiny --batch-tokens 3072 --steps 30
    XLA_FLAGS=--xla_gpu_enable_triton_gemm=false KERAS_BACKEND=jax \
        python benchmarks/run.py train fit --config big --vocab-size 32000 \
        --batch-tokens 65536 --length 64 --mixed-precision mixed_bfloat16 --peak-tflops 989

(the second on an H100 or H200, whose dense bfloat16 peak is 989 TFLOP/s; it runs without
TensorFlow; the XLA flag was 1.06x on an H100, benchmarks/README.md).

--pytorch then times PyTorch's nn.Transformer of the same sizes on the same batch shape and
device (`benchmarks/peers/pytorch_nmt.py`; CUDA where there is one, bfloat16
autocast under --mixed-precision mixed_bfloat16); it has no dropout, so it needs --dropout 0.

The train step is compiled as Keras' `jit_compile="auto"` decides unless --jit-compile says
on or off: under JAX that is `jax.jit` (off runs the step op by op, many
times slower), under TensorFlow XLA on a GPU and none on a CPU.

Prints one JSON line per run with the machine, its accelerator, versions, settings (the
resolved jit_compile among them) and tokens/s, and the model FLOPs utilisation estimate
(6 * parameters * target tokens / s, the usual approximation; attention's score products are
left out) when --peak-tflops is given.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

from benchmarks import flags, machine

JIT_COMPILE = {"auto": "auto", "on": True, "off": False}  # --jit-compile -> compile(jit_compile)


def wait_for_device(model) -> None:
    """Block until the last update is computed: JAX dispatches device work asynchronously, so
    `fit` can return before a GPU has finished its steps. The last weight is written last."""
    import keras

    keras.ops.convert_to_numpy(model.trainable_variables[-1])


def model_parser(prog: str | None, description: str) -> argparse.ArgumentParser:
    """A parser with the flags that choose the model and its precision: this workload's and
    profile_train_step_jax.py's, which add their own flags to it."""
    parser = flags.parser(prog, description)
    flags.add(
        parser, config={"default": "tiny", "choices": ("tiny", "base", "big")},
        vocab_size={"default": 8000, "help": "shared vocabulary"},
        length={"default": 32, "help": "source and target length"},
    )  # fmt: skip
    parser.add_argument(
        "--mixed-precision", default="none",
        choices=("none", "mixed_bfloat16", "mixed_float16"), help="dtype policy",
    )  # fmt: skip
    parser.add_argument(
        "--dropout", type=float, help="P_drop, overriding the preset's (base 0.1, big 0.3)"
    )
    return parser


def build_model(args, jit_compile):
    """Our Transformer of `model_parser`'s flags, compiled with the paper's Adam and
    schedule and our label-smoothed loss (`model.loss`)."""
    import keras

    from keras_transformer import TransformerConfig, build_transformer
    from keras_transformer.training.losses import MaskedLabelSmoothedCrossEntropy
    from keras_transformer.training.schedule import TransformerSchedule

    if args.mixed_precision != "none":
        keras.mixed_precision.set_dtype_policy(args.mixed_precision)
    overrides = {} if args.dropout is None else {"dropout": args.dropout}
    config = TransformerConfig.preset(
        args.config, args.vocab_size, max_length=args.length, **overrides
    )
    model = build_transformer(config)
    model.compile(
        optimizer=keras.optimizers.Adam(TransformerSchedule(config.d_model), 0.9, 0.98, 1e-9),
        loss=MaskedLabelSmoothedCrossEntropy(config.label_smoothing),
        jit_compile=jit_compile,
    )
    return model


def batch_rows(args) -> int:
    """Sentences per batch: --batch-tokens of --length tokens each (at least one)."""
    return max(1, args.batch_tokens // args.length)


def run(args) -> dict:
    import numpy as np

    model = build_model(args, JIT_COMPILE[args.jit_compile])
    rows = batch_rows(args)
    rng = np.random.default_rng(0)
    ids = rng.integers(4, args.vocab_size, size=(rows * (args.steps + args.warmup), args.length))
    x = {"source": ids.astype("int32"), "target": ids.astype("int32")}
    model.fit(x, ids, batch_size=rows, steps_per_epoch=args.warmup, epochs=1, verbose=0)
    wait_for_device(model)
    start = time.perf_counter()
    model.fit(x, ids, batch_size=rows, steps_per_epoch=args.steps, epochs=1, verbose=0)
    wait_for_device(model)
    seconds = time.perf_counter() - start
    result = {
        "machine": machine.description(),
        **model_facts(model, args, rows),
        "jit_compile": model.jit_compile,  # as resolved by Keras
    }
    return _with_rates(result, args, seconds)


def model_facts(model, args, rows: int) -> dict:
    """What a result of `build_model(args)` on batches of `rows` x --length records: the
    accelerator, backend and versions, the model and its precision."""
    import keras

    return {
        "accelerator": machine.accelerator_name(),
        "backend": keras.backend.backend(),
        "keras": keras.__version__,
        "python": platform.python_version(),
        "config": args.config,
        "parameters": model.count_params(),
        "batch": [rows, args.length],
        "mixed_precision": args.mixed_precision,
        "dropout": model.config.dropout,
    }


def _with_rates(result: dict, args, seconds: float) -> dict:
    """`result` of --steps steps of `result["batch"]` in `seconds`, with the step time, target
    tokens/s and, given --peak-tflops, MFU (6 x parameters x tokens/s / peak)."""
    rows, length = result["batch"]
    result["step_ms"] = round(1000 * seconds / args.steps, 1)
    result["target_tokens_per_sec"] = round(rows * length * args.steps / seconds)
    if args.peak_tflops:
        flops = 6 * result["parameters"] * result["target_tokens_per_sec"]
        result["mfu"] = round(flops / (args.peak_tflops * 1e12), 4)
    return result


def run_pytorch(args) -> dict:
    """PyTorch's nn.Transformer of the same sizes (no dropout) on the same batch shape."""
    import torch

    from benchmarks.peers.pytorch_nmt import make_train
    from benchmarks.peers.spec import Spec

    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = batch_rows(args)
    spec = Spec(config=args.config, vocab_size=args.vocab_size, batch=rows,
                length=args.length, out_length=args.length)  # fmt: skip
    bfloat16 = args.mixed_precision == "mixed_bfloat16"
    steps, parameters = make_train(spec, bfloat16=bfloat16, device=device)
    steps(args.warmup)
    start = time.perf_counter()
    steps(args.steps)
    seconds = time.perf_counter() - start
    del steps  # its model and optimizer: give the GPU memory back before ours runs
    torch.cuda.empty_cache()
    result = {
        "system": f"pytorch {torch.__version__}",
        "device": device,
        "config": args.config,
        "parameters": parameters,
        "batch": [rows, args.length],
        "bfloat16_autocast": bfloat16,
    }
    return _with_rates(result, args, seconds)


def parse_args(argv=None, prog: str | None = None) -> argparse.Namespace:
    parser = model_parser(prog, __doc__)
    parser.add_argument("--batch-tokens", type=int, default=3072, help="tokens per batch side")
    flags.add(parser, steps=20)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps (tracing, XLA)")
    parser.add_argument("--peak-tflops", type=float, default=0.0, help="device peak, for MFU")
    parser.add_argument(
        "--pytorch",
        action="store_true",
        help="also time PyTorch's nn.Transformer on the same shapes (needs --dropout 0)",
    )
    parser.add_argument(
        "--jit-compile", nargs="?", const="on", default="auto", choices=tuple(JIT_COMPILE),
        help="compile the train step: auto (Keras' choice: jax.jit under JAX, XLA on a "
        "TensorFlow GPU, none on a CPU), on (a bare --jit-compile) or off",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.pytorch and args.dropout != 0:
        given = "none, so the preset's" if args.dropout is None else args.dropout
        parser.error(f"--pytorch compares without dropout: pass --dropout 0 (given: {given})")
    return args


def main(argv=None, prog: str = "python benchmarks/run.py train fit") -> None:
    args = parse_args(argv, prog)
    # PyTorch first: JAX takes 75 % of a GPU's memory when it starts
    theirs = run_pytorch(args) if args.pytorch else None
    print(json.dumps(run(args)))
    if theirs:
        print(json.dumps(theirs))
