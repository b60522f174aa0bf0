"""Issue 54: what the XLA search's buffer length costs a one-sentence request: buffers of the
padded source width + EXTRA + MORE positions against width + EXTRA, with the same output
limits (each source's length + EXTRA) in both.

    TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 PYTHONPATH=. \\
        python benchmarks/results/2026-11-29-issue-54-buffer-length.py RUN [ROUNDS]
    PYTHONPATH=. python benchmarks/results/2026-11-29-issue-54-buffer-length.py BASE_RUN 6 \\
        --extra 5 --more 45 --per-length 3 --lengths 5 20

Two XLA searches of RUN in one process (`search_function(1)`, beam 4, the next-step stop, the
run's alpha, `max_extra_length` EXTRA, default 10); the second traced with
`search.fixed_shape_step` patched to MORE (default 40) more positions: its cache, its reorder
and self-attention span them from the first step, as the paper's limit of 50 makes them span
width + 50. Checked: the same ids on every sentence (for a trained RUN no output reaches
length + 10, so this is also the search with `max_extra_length` 50; random weights run every
output to its limit, and EXTRA 5 stands in for a trained model's short outputs). Then
alternated call by call over ROUNDS (default 20) rounds of `--per-length` (6) test sentences
of each of `--lengths` (~5, ~20, ~50) pieces; medians in ms. The bound of any design that
sizes the buffers to the output (growing them in static steps, or a short first pass): a study
kept as the command behind 2026-11-29-issue-54-one-thread-split.md; not a workload.
"""

import argparse
import time

import numpy as np
import tensorflow as tf

from benchmarks.latency_benchmark import pick_sentences
from keras_transformer import SearchOptions, artifacts, malloc
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator
from keras_transformer.decoding import search as search_module
from keras_transformer.decoding.search import pad_rows

TRACING = {"more": 0}  # positions added to the buffers of the search being traced


def patch_buffers() -> None:
    """`search.fixed_shape_step` builds buffers `TRACING["more"]` positions longer; the loop
    and the output limits are unchanged."""
    stock = search_module.fixed_shape_step

    def fixed_shape_step(model, memory, memory_mask, max_decode_length, *args):
        if TRACING["more"] is None:
            raise AssertionError("traced again while timing")
        return stock(model, memory, memory_mask, max_decode_length + TRACING["more"], *args)

    search_module.fixed_shape_step = fixed_shape_step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("rounds", type=int, nargs="?", default=20)
    parser.add_argument("--extra", type=int, default=10)
    parser.add_argument("--more", type=int, default=40)
    parser.add_argument("--per-length", type=int, default=6)
    parser.add_argument("--lengths", type=int, nargs="+", default=[5, 20, 50])
    args = parser.parse_args()
    malloc.keep_freed_memory()
    model, _, tokenizer = artifacts.load_trained(args.run)
    patch_buffers()
    options = SearchOptions(
        alpha=artifacts.run_eval_alpha(args.run), stop_lookahead="next", padded_decode=True,
        max_extra_length=args.extra,
    )  # fmt: skip
    translator = Translator(model, tokenizer, options, jit_compile=True)
    searches = {more: Translator(model, tokenizer, options, jit_compile=True).search_function(1)
                for more in (args.more, 0)}  # fmt: skip
    texts = [source for source, _ in read_pairs("sample_en_de", "test")]

    def count(text):
        return int(tokenizer.tokenize(tf.constant([text])).row_lengths()[0])

    for length in args.lengths:
        sentences = pick_sentences(texts, count, length, args.per_length)
        ids = [pad_rows(translator._xla_width(tokenizer.encode_source(
                   tf.constant([text]), model.config.max_length).to_tensor()))
               for text in sentences]  # fmt: skip
        found = {}
        for more, search in searches.items():  # traces each new width once
            TRACING["more"] = more
            found[more] = [search(source)[0].numpy().tolist() for source in ids]
        TRACING["more"] = None
        assert found[args.more] == found[0], length
        times = {more: [] for more in searches}
        for round_ in range(args.rounds):
            for source in ids:
                for more in list(searches)[:: 1 if round_ % 2 == 0 else -1]:
                    start = time.perf_counter()
                    searches[more](source)[0].numpy()
                    times[more].append(time.perf_counter() - start)
        ms = {more: 1e3 * float(np.median(t)) for more, t in times.items()}
        print(f"~{length} pieces: buffers of width + {args.extra + args.more} "
              f"{ms[args.more]:.2f} ms, width + {args.extra} {ms[0]:.2f} ms, ratio "
              f"{ms[args.more] / ms[0]:.3f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
