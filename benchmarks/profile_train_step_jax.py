"""Where a GPU training step's time goes under Keras' JAX backend: nested parts, each jitted.

    KERAS_BACKEND=jax python benchmarks/run.py profile jax --config big \
        --vocab-size 32000 --batch 512 --length 64 --mixed-precision mixed_bfloat16

The JAX twin of `profile tf` (TensorFlow), for a GPU machine without TensorFlow.
Each part is one `jax.jit` function of the model's variables over the same synthetic batch
(`--batch` sentences of `--length` tokens each side), and each part contains the previous one,
so the differences are the cost of what a part adds:

    forward          model.stateless_call(..., training=True) -> logits (their mean returned)
    + loss           our label-smoothed cross-entropy on the logits
    + backward       jax.value_and_grad of that loss over the trainable variables
    fit step         model.train_on_batch as compiled by `model.compile` (Adam, the paper's
                     schedule, our loss): the optimizer update and Keras' overhead are the
                     difference to "+ backward"

--attention fused swaps our attention core for `keras.ops.dot_product_attention` (cuDNN's
fused kernel under JAX on a GPU where it applies, else JAX's own), to measure what fusing it
would gain before building it into the layer.

Parts are timed round-robin (`--repeats` rounds of `--steps` calls each, every call waited for)
and the median per call is reported, with the share of the fit step.
"""

from __future__ import annotations

import json
import statistics
import time

from benchmarks import flags
from benchmarks.train_benchmark import build_model, model_facts, model_parser, wait_for_device


def _use_fused_attention() -> None:
    """Patch `ScaledDotProductAttention.call` (no attention dropout; no weights returned)."""
    from keras import ops

    from keras_transformer.layers.scaled_dot_product_attention import ScaledDotProductAttention

    def call(self, query, key, value, attention_mask=None, training=None):
        # (batch, h, len, d) -> (batch, len, h, d), the layout of ops.dot_product_attention
        q, k, v = (ops.transpose(t, (0, 2, 1, 3)) for t in (query, key, value))
        output = ops.dot_product_attention(q, k, v, mask=attention_mask)  # (b, q_len, h, d_v)
        return ops.transpose(output, (0, 2, 1, 3)), None  # -> (batch, h, q_len, d_v)

    ScaledDotProductAttention.call = call


def _parts(model, loss_fn, inputs, labels) -> dict:
    """name -> a no-argument function that runs the part once and waits for it."""
    import jax
    from keras import ops

    def logits_of(weights, frozen):  # frozen: the non-trainable ones, dropout seeds among them
        logits, _ = model.stateless_call(weights, frozen, inputs, training=True)
        return logits  # (batch, length, vocab)

    def loss_of(weights, frozen):
        return ops.mean(loss_fn(labels, logits_of(weights, frozen)))

    def jitted(function):
        """`function` of the variables' current values (`train_on_batch` donates the old ones)."""
        compiled = jax.jit(function)
        return lambda: jax.block_until_ready(
            compiled(
                [v.value for v in model.trainable_variables],
                [v.value for v in model.non_trainable_variables],
            )
        )

    def fit_step():
        model.train_on_batch(inputs, labels)
        wait_for_device(model)

    return {
        "forward": jitted(lambda w, f: ops.mean(logits_of(w, f))),
        "+ loss": jitted(loss_of),
        "+ backward": jitted(jax.value_and_grad(loss_of)),
        "fit step": fit_step,
    }


def run(args) -> dict:
    import numpy as np

    if args.attention == "fused":
        _use_fused_attention()
    model = build_model(args, jit_compile=True)
    loss_fn = model.loss
    rng = np.random.default_rng(0)
    ids = rng.integers(4, args.vocab_size, size=(args.batch, args.length)).astype("int32")
    parts = _parts(model, loss_fn, {"source": ids, "target": ids}, ids)
    times = {name: [] for name in parts}
    for part in parts.values():  # compile and warm up
        part()
        part()
    for _ in range(args.repeats):
        for name, part in parts.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                part()
            times[name].append(1000 * (time.perf_counter() - start) / args.steps)
    step_ms = statistics.median(times["fit step"])
    return {
        **model_facts(model, args, args.batch),
        "attention": args.attention,
        "ms": {name: round(statistics.median(t), 2) for name, t in times.items()},
        "share_of_fit_step": {
            name: round(statistics.median(t) / step_ms, 3) for name, t in times.items()
        },
    }


def main(argv=None, prog: str = "python benchmarks/run.py profile jax") -> None:
    parser = model_parser(prog, __doc__)
    flags.add(parser, batch=32, steps={"default": 5, "help": "calls per timed round"}, repeats=3)
    parser.add_argument(
        "--attention", default="ours", choices=("ours", "fused"),
        help="our attention core, or keras.ops.dot_product_attention in its place",
    )  # fmt: skip
    print(json.dumps(run(parser.parse_args(argv))))
