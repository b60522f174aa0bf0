"""Issue 54: the XLA search's `E^T` (the pre-softmax projection's kernel, `(d_model, vocab)`)
transposed once per search ("copy") against held in a variable made once ("variable":
`Translator(store_output_kernel=True)`, the XLA export's since 2026-11-29) and against no
`E^T` at all ("folded": each step multiplies by `E` `(vocab, d_model)` as it is, as
`fixed_shape_step(..., transpose_kernels=True)` does, the decoder's other kernels unchanged).

    TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 PYTHONPATH=. \\
        python benchmarks/results/2026-11-29-issue-54-output-kernel-variable.py RUN [ROUNDS]
    PYTHONPATH=. python benchmarks/results/2026-11-29-issue-54-output-kernel-variable.py \\
        BASE_RUN 4 --per-length 3 --lengths 5 20 --max-extra-length 5 --search-only [--growing]

Three translators of RUN in one process (beam 4, the next-step stop, the run's alpha),
"folded" traced with `SharedEmbedding.output_kernel` patched. The same translations checked
on every sentence; then each one's `translate_tensors` in a `tf.function` ("whole") and its
search on the (padded) source ids ("search") alternated call by call over ROUNDS (default 20)
rounds of `--per-length` (6) test sentences of each of `--lengths` (~5, ~20, ~50) pieces;
medians in ms and copy / each (above 1: the other faster). `--max-extra-length` (default 50,
the paper's): a smaller one stands in for a trained model's short outputs where RUN's random
weights would run every output to its limit. `--growing`: the growing search without XLA
(the default export's; there "variable" is the patch's). A one-off
study kept as the command behind 2026-11-29-issue-54-one-thread-split.md; not a workload.
"""

import argparse
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
TRACING = {"form": "copy"}  # the form a trace reads


def patch_output_kernel(model) -> None:
    """`SharedEmbedding.output_kernel` while tracing `TRACING["form"]`: "folded" gives None
    to `fixed_shape_step` (the layer's call then transposes in the step, which XLA folds into
    the product); "variable" reads a variable holding `transpose(E)` (for the growing search,
    which takes no stored kernel); otherwise this checkout's transpose."""
    stored = tf.Variable(model.token_embedding.output_kernel(), trainable=False)
    stock = SharedEmbedding.output_kernel

    def output_kernel(self):
        form = TRACING["form"]
        if form == "folded" and sys._getframe(1).f_code.co_name == "fixed_shape_step":
            return None
        return stored.value() if form == "variable" else stock(self)

    SharedEmbedding.output_kernel = output_kernel


def translators(model, tokenizer, options, growing: bool) -> dict:
    """`{form: (whole, search, translator)}`: `translate_tensors` and the search over source
    ids. Under XLA "variable" is `store_output_kernel=True`; the growing search takes no
    stored kernel, so there the patch gives it one."""
    spec = [tf.TensorSpec([None], tf.string)]
    systems = {}
    for name in FORMS:
        translator = Translator(
            model, tokenizer, options, jit_compile=not growing,
            store_output_kernel=name == "variable", transpose_kernels=False,
        )  # fmt: skip
        whole = tf.function(translator.translate_tensors, input_signature=spec)
        systems[name] = (whole, translator.search_function(1), translator)
    return systems


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("rounds", type=int, nargs="?", default=20)
    parser.add_argument("--per-length", type=int, default=6)
    parser.add_argument("--lengths", type=int, nargs="+", default=[5, 20, 50])
    parser.add_argument("--max-extra-length", type=int, default=50)
    parser.add_argument("--search-only", action="store_true")
    parser.add_argument("--growing", action="store_true")
    args = parser.parse_args()
    malloc.keep_freed_memory()
    model, _, tokenizer = artifacts.load_trained(args.run)
    patch_output_kernel(model)
    options = SearchOptions(
        alpha=artifacts.run_eval_alpha(args.run), stop_lookahead="next",
        padded_decode=not args.growing,
        max_extra_length=args.max_extra_length,
    )  # fmt: skip
    systems = translators(model, tokenizer, options, args.growing)
    texts = [source for source, _ in read_pairs("sample_en_de", "test")]
    parts = ("search",) if args.search_only else ("whole", "search")

    def count(text):
        return int(tokenizer.tokenize(tf.constant([text])).row_lengths()[0])

    for length in args.lengths:
        sentences = pick_sentences(texts, count, length, args.per_length)
        ids = [tokenizer.encode_source(tf.constant([t]), model.config.max_length).to_tensor()
               for t in sentences]  # fmt: skip
        if not args.growing:
            ids = [pad_rows(systems["copy"][2]._xla_width(source)) for source in ids]
        found = {}
        for name, (whole, search, _) in systems.items():  # traces each new width once
            TRACING["form"] = name if args.growing or name == "folded" else "copy"
            found[name] = [search(source)[0].numpy().tolist() for source in ids]
            if not args.search_only:
                found[name] += [whole(tf.constant([t]))["translations"].numpy().tolist()
                                for t in sentences]  # fmt: skip
        TRACING["form"] = "copy"
        assert found["copy"] == found["variable"] == found["folded"], length
        times = {f"{name} {part}": [] for name in systems for part in parts}
        for round_ in range(args.rounds):
            for text, source in zip(sentences, ids):
                for name in list(systems)[:: 1 if round_ % 2 == 0 else -1]:
                    whole, search, _ = systems[name]
                    calls = {"whole": (whole, tf.constant([text])), "search": (search, source)}
                    for part in parts:
                        function, arg = calls[part]
                        start = time.perf_counter()
                        tf.nest.map_structure(lambda x: x.numpy(), function(arg))
                        times[f"{name} {part}"].append(time.perf_counter() - start)
        ms = {key: 1e3 * float(np.median(t)) for key, t in times.items()}
        ratios = [f"copy / {name}: " + ", ".join(
                      f"{part} {ms[f'copy {part}'] / ms[f'{name} {part}']:.3f}" for part in parts)
                  for name in FORMS[1:]]  # fmt: skip
        print(f"~{length} pieces: " + ", ".join(f"{k} {v:.2f}" for k, v in ms.items())
              + "; " + "; ".join(ratios), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
