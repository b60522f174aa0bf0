"""Issue 54, a probe (not kept): the beam search's per-row top-k (`beam_search.top_k_rows`,
blocks of 128) against one `tf.math.top_k` over the whole row, in the XLA search; both
traced in one process, same ids checked, then alternated call by call (medians).

    python benchmarks/results/2026-11-29-issue-54-top-k-under-xla.py RUN ROUNDS [BATCH]

RUN: the default run (`sample_en_de`: the test sentences of 5, 20 and 50 pieces, six each,
one a call; with BATCH, the first BATCH test sentences as one batch) or an untrained run
(`keras_transformer.testing.model_dir.make_preset_model_dir(DIR, "base", 32000, texts)`:
one made-up source of 20 pieces, or BATCH random ones). XLA search: `search_function(1)`,
beam 4, the next-step stop. Results: 2026-11-29-issue-54-idle-requests.md.
"""

import importlib
import os
import sys
import time

import numpy as np
import tensorflow as tf

from keras_transformer import SearchOptions, artifacts
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator, beam_search
from keras_transformer.decoding.translator import XLA_WIDTH_MULTIPLE, pad_width

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ab = importlib.import_module("2026-11-27-issue-54-fixed-slot-ab")
BLOCKS = beam_search.top_k_rows


def whole_row(values, k, block=None):
    return tf.math.top_k(values, k=k)


def batch_source(tokenizer, model, trained: bool, batch: int) -> tf.Tensor:
    if trained:
        texts = [source for source, _ in read_pairs("sample_en_de", "test")][:batch]
        ids = tokenizer.encode_source(tf.constant(texts), model.config.max_length).to_tensor()
    else:
        words = np.random.default_rng(0).integers(7, 1000, (batch, 19))
        ids = tf.constant(np.concatenate([words, np.full((batch, 1), 2)], 1), tf.int32)
    return pad_width(ids, XLA_WIDTH_MULTIPLE)


def main() -> None:
    run, rounds = sys.argv[1], int(sys.argv[2])
    model, _, tokenizer = artifacts.load_trained(run)
    trained = os.path.exists(os.path.join(run, "training_config.json"))
    options = SearchOptions(alpha=artifacts.run_eval_alpha(run) if trained else 0.6,
                            stop_lookahead="next", padded_decode=True)  # fmt: skip
    if len(sys.argv) > 3:
        sources = {f"batch {sys.argv[3]}": [batch_source(tokenizer, model, trained,
                                                         int(sys.argv[3]))]}  # fmt: skip
    else:
        sources = ab.sources(tokenizer, model.config.max_length, trained)
    searches = {}
    for name, top_k in (("blocks", BLOCKS), ("whole row", whole_row)):
        beam_search.top_k_rows = top_k  # read when the step is traced
        search = Translator(model, tokenizer, options, jit_compile=True).search_function(1)
        for batch in sources.values():
            search(batch[0])
        searches[name] = search
    beam_search.top_k_rows = BLOCKS
    for pieces, batch in sources.items():
        same = sum(int(np.array_equal(searches["blocks"](s)[0], searches["whole row"](s)[0]))
                   for s in batch)  # fmt: skip
        times = {name: [] for name in searches}
        for _ in range(rounds):
            for source in batch:
                for name, search in searches.items():
                    start = time.perf_counter()
                    search(source)[0].numpy()
                    times[name].append(time.perf_counter() - start)
        ms = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
        print(f"{pieces}: same ids {same} of {len(batch)}; blocks {ms['blocks']:.2f} ms, whole "
              f"row {ms['whole row']:.2f} ms, blocks / whole row "
              f"{ms['blocks'] / ms['whole row']:.3f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
