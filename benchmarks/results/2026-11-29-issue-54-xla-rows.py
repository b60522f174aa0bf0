"""Issue 54: the XLA beam search (fixed buffers) against the growing search, by batch rows.

    python benchmarks/results/2026-11-29-issue-54-xla-rows.py RUN ROUNDS 1,2,4,8,16,32

`Translator(..., jit_compile=True).search_function(1)` (the XLA search, sources padded to
the width and row buckets as the translator pads them) and the growing search of
`Translator(...)` (no XLA), both with the run's alpha and the next-step stop, on the first
ROWS test sentences of 12-24 pieces as one batch, each warmed once, then alternated call by
call for ROUNDS rounds; medians in ms and their ratio. The rows a translator sends to XLA
(`search.XLA_MAX_ROWS`) were chosen from it. A one-off study kept as the command behind
2026-11-29-issue-54-xla-rows.md; not a workload.
"""

import sys
import time

import numpy as np
import tensorflow as tf

from keras_transformer import SearchOptions, artifacts, malloc
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator
from keras_transformer.decoding.search import XLA_WIDTH_MULTIPLE, pad_rows, pad_width


def main() -> None:
    malloc.keep_freed_memory()
    run, rounds = sys.argv[1], int(sys.argv[2])
    sizes = [int(n) for n in sys.argv[3].split(",")]
    model, _, tokenizer = artifacts.load_trained(run)
    options = SearchOptions(alpha=artifacts.run_eval_alpha(run), stop_lookahead="next")
    xla = Translator(model, tokenizer, options.replace(padded_decode=True), jit_compile=True)
    fixed = xla.search_function(1)
    growing = Translator(model, tokenizer, options).search_function(1)
    texts = [source for source, _ in read_pairs("sample_en_de", "test")]
    lengths = tokenizer.tokenize(tf.constant(texts)).row_lengths().numpy()
    pool = [text for text, n in zip(texts, lengths) if 12 <= n <= 24]
    for rows in sizes:
        source = tokenizer.encode_source(tf.constant(pool[:rows]), model.config.max_length)
        source = source.to_tensor()
        padded = pad_rows(pad_width(source, XLA_WIDTH_MULTIPLE))
        fixed(padded)
        growing(source)
        times = {"xla": [], "growing": []}
        calls = (("xla", fixed, padded), ("growing", growing, source))
        for round_ in range(rounds):
            for name, function, ids in calls[:: 1 if round_ % 2 == 0 else -1]:
                start = time.perf_counter()
                function(ids)[0].numpy()
                times[name].append(time.perf_counter() - start)
        ms = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
        print(f"rows {rows}: XLA {ms['xla']:.1f} ms, growing {ms['growing']:.1f} ms, "
              f"XLA / growing {ms['xla'] / ms['growing']:.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
