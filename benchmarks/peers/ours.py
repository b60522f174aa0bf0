"""keras-transformer: training as `keras_transformer.training.trainer` compiles the model,
decoding with our cached beam search, serving through the exported `serving_default`."""

from __future__ import annotations

import numpy as np

from benchmarks.peers.spec import Spec, decode_sources, train_batch

NAME = "keras-transformer"
NAME_BFLOAT16 = "keras-transformer-bfloat16"


def build_model(spec: Spec, seed: int = 0, dtype: str | None = None):
    """Our `Transformer` of `spec`'s sizes with random weights (decoding; CTranslate2's
    source), under the Keras dtype policy `dtype` (default: the global one)."""
    import keras

    from keras_transformer.model import build_transformer

    keras.utils.set_random_seed(seed)
    return build_transformer(spec.model_config(), dtype=dtype)


def make_train(spec: Spec, dtype: str | None = None):
    """`(run(steps), parameters)`: `model.fit` steps with the pipeline's `compile_model`
    (its optimizer, loss and metrics), on one fixed batch fed by `tf.data`. `dtype`
    "mixed_bfloat16": the layers compute in bfloat16, as `--mixed-precision auto` trains on a
    CPU with bfloat16 arithmetic (variables, logits, loss and optimizer stay float32, which
    do not depend on the global policy)."""
    import tensorflow as tf

    from keras_transformer.training.trainer import compile_model

    model = build_model(spec, dtype=dtype)
    compile_model(model, model.config, spec.training_config())
    batch = train_batch(spec)
    inputs = {"source": batch["source"], "target": batch["target"]}
    data = tf.data.Dataset.from_tensors((inputs, batch["labels"])).repeat()
    # Each `fit` makes a new iterator, and one with tf.data autotuning is only freed when the
    # tuning thread next wakes up (it sleeps 10 ms, 20 ms, 40 ms..., so it wakes 10.23 s,
    # 20.47 s, 40.95 s after it started): a 5-step fit of ~23 s took 40.96 s. One fixed batch
    # needs no tuning.
    options = tf.data.Options()
    options.autotune.enabled = False
    data = data.with_options(options)

    def run(steps: int) -> None:
        model.fit(data, epochs=1, steps_per_epoch=steps, shuffle=False, verbose=0)

    return run, model.count_params()


def make_decode(spec: Spec, model):
    """`(run() -> output lengths (batch,), parameters)`: beam search of exactly
    `spec.out_length` tokens (EOS masked out), one `tf.function` as decode_benchmark.py's."""
    import tensorflow as tf

    from benchmarks.decode_benchmark import forced_search

    search = forced_search(model, model.config, spec.beam, spec.out_length)
    source = tf.constant(decode_sources(spec))

    def run() -> np.ndarray:
        ids = search(source).numpy()[:, 0, 1:]  # best hypothesis -> (batch, steps run)
        ended = ids == model.config.eos_id  # PAD may be a word here: count up to EOS
        return np.where(ended.any(axis=1), ended.argmax(axis=1) + 1, ids.shape[1])

    return run, model.count_params()


def bfloat16_copy(model):
    """`model` rebuilt under Keras' "bfloat16" policy, its weights rounded to bfloat16: what
    `artifacts.load_trained(..., dtype="bfloat16")` and `--dtype bfloat16` decode with."""
    from keras import ops

    from keras_transformer.model import build_transformer

    copy = build_transformer(model.config, dtype="bfloat16")
    for target, source in zip(copy.weights, model.weights):
        target.assign(ops.cast(source, "bfloat16"))
    return copy


def make_decode_bfloat16(spec: Spec, model):
    """`make_decode` of `bfloat16_copy(model)`."""
    return make_decode(spec, bfloat16_copy(model))


def make_serving(model_dir: str, workdir: str, beam: int, sentences: list[str], batches):
    """{batch: run()} calling the exported `serving_default` signature on `sentences` in
    order, `batch` at a time (every batch size translates the same sentences)."""
    import tensorflow as tf

    from keras_transformer.config import SearchOptions
    from keras_transformer.serving.export import export_savedmodel

    path = export_savedmodel(
        model_dir, workdir, search=SearchOptions(beam_size=beam), n_best=1, check_ops=False
    )
    signature = tf.saved_model.load(path).signatures["serving_default"]

    def runner(batch: int):
        chunks = [sentences[i : i + batch] for i in range(0, len(sentences), batch)]
        return lambda: [signature(text=tf.constant(chunk)) for chunk in chunks]

    return {batch: runner(batch) for batch in batches}
