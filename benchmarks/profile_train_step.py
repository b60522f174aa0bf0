"""Where the time of one training step goes: the step cut into nested parts, each timed alone.

    python benchmarks/run.py profile tf --config base --vocab-size 32000 --batch 32 \
        --length 32 --repeats 5 [--trace-dir /tmp/trace]

Every part is one `tf.function` over the same synthetic batch (`--batch` sentences of
`--length` tokens on each side), and each part contains the previous one, so the differences
are the cost of what a part adds:

    forward            model(inputs, training=True)                  -> logits
    + loss             our label-smoothed cross-entropy on the logits
    + backward         the gradients of the loss (GradientTape)
      (log-softmax)    the same with the loss written through the log-softmax, as before
    + adam (keras)     Keras 3's Adam update (element-wise ops, one pass each)
    fit step           `model.train_on_batch` as the pipeline compiles it (our optimizer,
                       loss and metrics): Keras' own overhead is fit step - the parts above
    fit step, no metrics   the same without the token metrics (accuracy, perplexity, count)

Parts are timed round-robin (`--repeats` rounds), so load on a shared machine hits all alike;
the median per part is reported. `--trace-dir` also writes a TF profiler trace of two fit steps
(open with TensorBoard's profile plugin) for an op-by-op view.
"""

from __future__ import annotations

import json
import platform
import time

from benchmarks import flags, machine


def _parts(model, loss_fn, optimizer, inputs, labels):
    import tensorflow as tf

    variables = model.trainable_variables

    @tf.function
    def forward():
        return model(inputs, training=True)  # (batch, length, vocab)

    @tf.function
    def forward_loss():
        return tf.reduce_mean(loss_fn(labels, model(inputs, training=True)))

    @tf.function
    def backward_log_softmax_loss():
        with tf.GradientTape() as tape:
            loss = _log_softmax_loss(labels, model(inputs, training=True), loss_fn)
        return tape.gradient(loss, variables)

    def _grads():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(loss_fn(labels, model(inputs, training=True)))
        return tape.gradient(loss, variables)

    @tf.function
    def backward():
        return _grads()

    @tf.function
    def keras_adam():
        optimizer.apply(_grads(), variables)

    return {
        "forward": forward,
        "+ loss": forward_loss,
        "+ backward": backward,
        "+ backward, log-softmax loss": backward_log_softmax_loss,
        "+ adam (keras)": keras_adam,
    }


def _log_softmax_loss(labels, logits, loss_fn):
    """The loss as it was written before: through the (batch, len, vocab) log-softmax."""
    import tensorflow as tf

    log_probs = tf.nn.log_softmax(logits)  # (batch, len, vocab)
    nll = -tf.gather(log_probs, labels, batch_dims=2)  # (batch, len)
    eps = loss_fn.label_smoothing
    return tf.reduce_mean((1 - eps) * nll - eps * tf.reduce_mean(log_probs, -1))


def run(args) -> dict:
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_transformer import TransformerConfig, build_transformer
    from keras_transformer.training.losses import MaskedLabelSmoothedCrossEntropy
    from keras_transformer.training.schedule import TransformerSchedule

    config = TransformerConfig.preset(args.config, args.vocab_size, max_length=args.length)
    dtype = args.dtype or None
    model = build_transformer(config, dtype=dtype)
    rng = np.random.default_rng(0)
    ids = rng.integers(4, args.vocab_size, size=(args.batch, args.length)).astype("int32")
    inputs = {"source": tf.constant(ids), "target": tf.constant(ids)}
    labels = tf.constant(ids)
    loss_fn = MaskedLabelSmoothedCrossEntropy(config.label_smoothing)
    schedule = TransformerSchedule(config.d_model)
    optimizer = keras.optimizers.Adam(schedule, 0.9, 0.98, 1e-9)
    optimizer.build(model.trainable_variables)
    parts = _parts(model, loss_fn, optimizer, inputs, labels)

    from keras_transformer.config import TrainingConfig
    from keras_transformer.training.trainer import compile_model

    fit_model = build_transformer(config, dtype=dtype)
    compile_model(fit_model, config, TrainingConfig.from_flat(jit_compile=False))
    parts["fit step"] = lambda: fit_model.train_on_batch(inputs, labels)
    bare_model = build_transformer(config, dtype=dtype)  # the same step without the token metrics
    compile_model(bare_model, config, TrainingConfig.from_flat(jit_compile=False))
    bare_model.compile(optimizer=bare_model.optimizer, loss=bare_model.loss)
    parts["fit step, no metrics"] = lambda: bare_model.train_on_batch(inputs, labels)

    for fn in parts.values():  # trace and warm up
        fn()
        fn()
    times = {name: [] for name in parts}
    for _ in range(args.repeats):
        for name, fn in parts.items():
            start = time.perf_counter()
            result = fn()
            if result is not None and not isinstance(result, (float, list)):
                np.asarray(tf.nest.flatten(result)[0])  # wait for the value
            times[name].append(time.perf_counter() - start)
    if args.trace_dir:
        tf.profiler.experimental.start(args.trace_dir)
        for _ in range(2):
            parts["fit step"]()
        tf.profiler.experimental.stop()
    medians = {name: float(np.median(t)) for name, t in times.items()}
    tokens = args.batch * args.length
    return {
        "machine": machine.description(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "config": args.config,
        "vocab_size": args.vocab_size,
        "dtype": dtype or keras.config.dtype_policy().name,
        "parameters": model.count_params(),
        "batch": [args.batch, args.length],
        "seconds": {k: round(v, 4) for k, v in medians.items()},
        "target_tokens_per_s": {k: round(tokens / v, 1) for k, v in medians.items()},
    }


def _table(result) -> str:
    s = result["seconds"]
    order = ["forward", "+ loss", "+ backward", "+ adam (keras)"]
    rows = ["| part | s (cumulative) | s added | share of the keras step |", "|---|---:|---:|---:|"]
    total = s["+ adam (keras)"]
    previous = 0.0
    for name in order:
        rows.append(
            f"| {name} | {s[name]:.3f} | {s[name] - previous:.3f} | "
            f"{100 * (s[name] - previous) / total:.0f}% |"
        )
        previous = s[name]
    rows.append(
        f"| + backward, log-softmax loss instead | {s['+ backward, log-softmax loss']:.3f} | "
        f"{s['+ backward, log-softmax loss'] - s['+ loss']:.3f} | |"
    )
    rows.append(f"| fit step (train_on_batch) | {s['fit step']:.3f} | | |")
    rows.append(f"| fit step without metrics | {s['fit step, no metrics']:.3f} | | |")
    return "\n".join(rows)


def main(argv=None, prog: str = "python benchmarks/run.py profile tf") -> None:
    parser = flags.parser(prog, __doc__)
    flags.add(parser, config="base", vocab_size=32000, batch=32, length=32)
    parser.add_argument(
        "--dtype", default="",
        help="Keras dtype policy of the models, e.g. mixed_bfloat16 (default: the global one)",
    )  # fmt: skip
    flags.add(parser, repeats={"default": 5, "help": "timed rounds over the parts"})
    parser.add_argument("--trace-dir", default="", help="also write a TF profiler trace here")
    flags.add(parser, json="")
    args = parser.parse_args(argv)  # glibc's malloc: set by benchmarks.catalog, as the commands
    result = run(args)
    print(json.dumps(result))
    print(_table(result))
    flags.write_json(result, args.json)
