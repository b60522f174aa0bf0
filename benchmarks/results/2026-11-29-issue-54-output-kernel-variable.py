"""Issue 54: the XLA search's `E^T` (the pre-softmax projection's kernel, `(d_model, vocab)`)
transposed once per search (this checkout, "copy") against held in a variable made once
("variable") and against no `E^T` at all ("folded": each step multiplies by `E` `(vocab,
d_model)` as it is, as `fixed_shape_step(..., transpose_kernels=True)` does, the decoder's
other kernels unchanged).

    TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 PYTHONPATH=. \
        python benchmarks/results/2026-11-29-issue-54-output-kernel-variable.py RUN [ROUNDS]

Three XLA translators of RUN in one process (beam 4, the next-step stop, the run's alpha),
each traced with `SharedEmbedding.output_kernel` patched to its form. The same translations
checked on every sentence; then each one's
`translate_tensors` in a `tf.function` ("whole") and its XLA search on the padded source ids
("search") alternated call by call over ROUNDS (default 20) rounds of 6 test sentences of ~5,
~20 and ~50 pieces; medians in ms and copy / each (above 1: the other faster). A
one-off study kept as the command behind 2026-11-29-issue-54-one-thread-split.md; not a
workload.
"""

import sys
import time

import numpy as np
import tensorflow as tf

from benchmarks.latency_benchmark import pick_sentences
from keras_transformer import SearchOptions, artifacts, malloc
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator
from keras_transformer.decoding.search import pad_rows
from keras_transformer.layers.shared_embedding import SharedEmbedding

FORMS = ("copy", "variable", "folded")
TRACING = {"form": "copy"}  # the form a trace reads; None once all are traced


def patch_output_kernel(model) -> None:
    """`SharedEmbedding.output_kernel` as `TRACING["form"]`: "copy" this checkout's,
    "variable" a variable holding `transpose(E)`, "folded" None for the search's step
    (`fixed_shape_step` calls it once before the loop; the layer's call then transposes in
    the step, which XLA folds into the product); fails on None."""
    stored = tf.Variable(tf.transpose(model.token_embedding.embeddings.value), trainable=False)
    stock = SharedEmbedding.output_kernel

    def output_kernel(self):
        form = TRACING["form"]
        if form is None:
            raise AssertionError("traced again while timing")
        if form == "folded" and sys._getframe(1).f_code.co_name == "fixed_shape_step":
            return None
        return stored.value() if form == "variable" else stock(self)

    SharedEmbedding.output_kernel = output_kernel


def main() -> None:
    malloc.keep_freed_memory()
    run = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    model, _, tokenizer = artifacts.load_trained(run)
    patch_output_kernel(model)
    options = SearchOptions(
        alpha=artifacts.run_eval_alpha(run), stop_lookahead="next", padded_decode=True
    )
    spec = [tf.TensorSpec([None], tf.string)]
    systems = {}
    for name in FORMS:
        translator = Translator(model, tokenizer, options, jit_compile=True)
        whole = tf.function(translator.translate_tensors, input_signature=spec)
        systems[name] = (whole, translator.search_function(1))
    texts = [source for source, _ in read_pairs("sample_en_de", "test")]

    def count(text):
        return int(tokenizer.tokenize(tf.constant([text])).row_lengths()[0])

    for length in (5, 20, 50):
        sentences = pick_sentences(texts, count, length, 6)
        ids = [pad_rows(translator._xla_width(tokenizer.encode_source(
                   tf.constant([text]), model.config.max_length).to_tensor()))
               for text in sentences]  # fmt: skip
        outputs = {}
        for name, (whole, search) in systems.items():  # traces each new width once
            TRACING["form"] = name
            outputs[name] = [whole(tf.constant([t]))["translations"].numpy().tolist()
                             for t in sentences]  # fmt: skip
            for source in ids:
                search(source)
        TRACING["form"] = None
        assert outputs["copy"] == outputs["variable"] == outputs["folded"], length
        times = {f"{name} {part}": [] for name in systems for part in ("whole", "search")}
        for round_ in range(rounds):
            for text, source in zip(sentences, ids):
                for name in list(systems)[:: 1 if round_ % 2 == 0 else -1]:
                    whole, search = systems[name]
                    start = time.perf_counter()
                    whole(tf.constant([text]))["translations"].numpy()
                    times[f"{name} whole"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    search(source)[0].numpy()
                    times[f"{name} search"].append(time.perf_counter() - start)
        ms = {key: 1e3 * float(np.median(t)) for key, t in times.items()}
        print(f"~{length} pieces: " + ", ".join(f"{k} {v:.2f}" for k, v in ms.items())
              + "".join(f"; copy / {name}: whole {ms['copy whole'] / ms[f'{name} whole']:.3f},"
                        f" search {ms['copy search'] / ms[f'{name} search']:.3f}"
                        for name in FORMS[1:]), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
