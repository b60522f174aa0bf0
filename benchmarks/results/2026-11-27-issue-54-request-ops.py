"""Issue 54, a one-sentence request's string-side TF ops: the documents code of another
checkout against this one's, and `E^T` kept as a variable, in one process.

    git worktree add /tmp/before 17c6706
    python benchmarks/results/2026-11-27-issue-54-request-ops.py RUN --before /tmp/before \
        [--rounds 25]

The whole request of the XLA translator (`Translator(..., jit_compile=True)
.translate_tensors` in a `tf.function`, beam 4, the next-step stop, the run's alpha) on 8
test sentences of 5, 20 and 50 pieces of the run RUN (the default run's model), three
systems built in one process and alternated call by call (medians): this checkout; the same
with `decoding.documents` and `data.segmenter` loaded from `--before` (17c6706: per-segment
joins and sums as ragged reductions, ragged tensors validated); this checkout with the
output projection's `E^T` read from a variable instead of copied once per search. All three
must give the same translations. A one-off study kept as the command behind
2026-11-27-issue-54-request-ops.md; not a workload.
"""

import argparse
import importlib.util
import os
import sys
import time

import numpy as np
import tensorflow as tf

from keras_transformer import SearchOptions, artifacts
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator
from keras_transformer.decoding import translator as translator_module

SIGNATURE = [tf.TensorSpec([None], tf.string)]


def load_module(name: str, path: str):
    """The Python file `path` as a module called `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def traced(model, tokenizer, options, patch=None):
    """The whole request as a concrete `tf.function`, traced with `patch()` in force (a
    context-free callable returning an undo callable)."""
    translator = Translator(model, tokenizer, options, jit_compile=True)
    function = tf.function(translator.translate_tensors, input_signature=SIGNATURE)
    undo = patch() if patch else None
    function.get_concrete_function()
    if undo:
        undo()
    return function


def before_documents(checkout: str):
    """A patch that makes the translator trace `--before`'s documents and segmenter code."""
    old_segmenter = load_module(
        "before_segmenter", os.path.join(checkout, "keras_transformer/data/segmenter.py")
    )
    old_documents = load_module(
        "before_documents", os.path.join(checkout, "keras_transformer/decoding/documents.py")
    )
    old_documents.segment = old_segmenter.segment

    def patch():
        current = translator_module.translate_documents
        translator_module.translate_documents = old_documents.translate_documents
        return lambda: setattr(translator_module, "translate_documents", current)

    return patch


def variable_output_kernel(model):
    """A patch that reads `E^T` from a variable made once (d_model, vocab)."""
    embedding = model.token_embedding
    kernel = tf.Variable(tf.transpose(embedding.embeddings), trainable=False)
    layer_type = type(embedding)

    def patch():
        current = layer_type.output_kernel
        layer_type.output_kernel = lambda self: tf.convert_to_tensor(kernel)
        return lambda: setattr(layer_type, "output_kernel", current)

    return patch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="the default run's model directory")
    parser.add_argument("--before", required=True, help="a checkout of the code before")
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    model, _, tokenizer = artifacts.load_trained(args.run)
    options = SearchOptions(
        alpha=artifacts.run_eval_alpha(args.run), stop_lookahead="next", padded_decode=True
    )
    systems = {
        "this checkout": traced(model, tokenizer, options),
        "documents before": traced(model, tokenizer, options, before_documents(args.before)),
        "E^T variable": traced(model, tokenizer, options, variable_output_kernel(model)),
    }
    texts = [source for source, _ in read_pairs("sample_en_de", "test")]
    print("| pieces | " + " | ".join(f"{name} ms" for name in systems) + " | ratios |")
    print("|---:|" + "---:|" * len(systems) + "---|")
    for pieces in (5, 20, 50):
        chosen = [t for t in texts if len(tokenizer.tokenize(tf.constant([t])).flat_values)
                  == pieces][:8]  # fmt: skip
        times = {name: [] for name in systems}
        for text in chosen:  # warm-up, and the same translations from every system
            outputs = [f(tf.constant([text]))["translations"].numpy() for f in systems.values()]
            assert all((o == outputs[0]).all() for o in outputs), (text, outputs)
        for _ in range(args.rounds):
            for text in chosen:
                request = tf.constant([text])
                for name, function in systems.items():
                    start = time.perf_counter()
                    function(request)["translations"].numpy()
                    times[name].append(time.perf_counter() - start)
        medians = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
        base = medians["this checkout"]
        ratios = ", ".join(f"{m / base:.3f}" for m in medians.values())
        print(f"| {pieces} | " + " | ".join(f"{m:.2f}" for m in medians.values())
              + f" | {ratios} |")  # fmt: skip


if __name__ == "__main__":
    main()
