"""Issue 54, the XLA search's kernel layout measured again on this machine's CPU.

    python benchmarks/results/2026-11-27-issue-54-kernel-layout.py RUN [--rounds 6]

The XLA search (`Translator(..., jit_compile=True).search_function(1)`, beam 4, the
next-step stop, at most source + 50 pieces) of one source, with the decoder's kernels as
stored `(in, out)` and read through their `(out, in)` transposes (`transpose_kernels`), the
two built in one process and alternated call by call (medians): base size with random weights
(every search runs to its limit) in float32 and bfloat16, big size in float32 (half the
rounds), and the trained run RUN (the default run's model) in float32. Sources: 20 pieces
(base, big), 6 and 20 pieces (RUN: its test sentences of those lengths). Both layouts must
give the same ids. A one-off study kept as the command behind
2026-11-27-issue-54-kernel-layout.md; not a workload.
"""

import argparse
import os
import tempfile
import time

import numpy as np
import tensorflow as tf

from keras_transformer import SearchOptions, artifacts
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator
from keras_transformer.decoding.search import XLA_WIDTH_MULTIPLE, pad_width
from keras_transformer.testing import model_dir as model_dirs


def compare(model, tokenizer, source, rounds: int) -> dict:
    """Median ms of the XLA search of `source` (1, len) with kernels as stored and
    transposed, alternated; whether the ids are the same."""
    options = SearchOptions(stop_lookahead="next", padded_decode=True)
    source = pad_width(source, XLA_WIDTH_MULTIPLE)
    searches = {
        layout: Translator(
            model, tokenizer, options, jit_compile=True, transpose_kernels=layout == "transposed"
        ).search_function(1)
        for layout in ("stored", "transposed")
    }
    ids = {layout: search(source)[0].numpy() for layout, search in searches.items()}  # compile
    times = {layout: [] for layout in searches}
    for round_ in range(rounds):
        for layout in list(searches)[:: 1 if round_ % 2 == 0 else -1]:
            start = time.perf_counter()
            searches[layout](source)[0].numpy()
            times[layout].append(time.perf_counter() - start)
    ms = {layout: 1e3 * float(np.median(t)) for layout, t in times.items()}
    return dict(stored_ms=ms["stored"], transposed_ms=ms["transposed"],
                ratio=ms["transposed"] / ms["stored"],
                same_ids=bool(np.array_equal(ids["stored"], ids["transposed"])))  # fmt: skip


def source_of(tokenizer, text: str, max_length: int) -> tf.Tensor:
    return tokenizer.encode_source(tf.constant([text]), max_length).to_tensor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="the default run's model directory")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        texts = [text for pair in read_pairs("sample_en_de", "train") for text in pair]
        source = tf.constant([[5 + i for i in range(19)] + [3]], tf.int32)  # 20 pieces
        for preset, dtype, rounds in (("base", "float32", args.rounds),
                                      ("base", "bfloat16", args.rounds),
                                      ("big", "float32", max(args.rounds // 2, 1))):  # fmt: skip
            directory = os.path.join(workdir, preset)
            if not os.path.exists(directory):
                model_dirs.make_preset_model_dir(directory, preset, 32000, texts)
            model, _, tokenizer = artifacts.load_trained(directory, dtype=dtype)
            rows.append(dict(model=f"{preset}, random", dtype=dtype, pieces=20,
                             **compare(model, tokenizer, source, rounds)))  # fmt: skip
    model, _, tokenizer = artifacts.load_trained(args.run)
    tests = [src for src, _ in read_pairs("sample_en_de", "test")]
    for pieces in (6, 20):
        text = next(t for t in tests if len(tokenizer.tokenize(tf.constant([t]))[0]) == pieces)
        source = source_of(tokenizer, text, model.config.max_length)
        rows.append(dict(model="default run", dtype="float32", pieces=pieces,
                         **compare(model, tokenizer, source, 10 * args.rounds)))  # fmt: skip
    print("| model | dtype | source pieces | as stored (ms) | transposed (ms) | ratio | same ids |")
    print("|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['model']} | {r['dtype']} | {r['pieces']} | {r['stored_ms']:.1f} | "
              f"{r['transposed_ms']:.1f} | {r['ratio']:.3f} | {r['same_ids']} |")  # fmt: skip


if __name__ == "__main__":
    main()
