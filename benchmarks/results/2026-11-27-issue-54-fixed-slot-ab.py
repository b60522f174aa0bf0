"""Issue 54, a probe: the XLA search with a fixed-size slot cache (never reordered) against
the fixed-shape design (caches gathered by parent every step), in one process.

    git worktree add /tmp/probe 0db98b8 && cd /tmp/probe   # the diff's tree (before
    git apply benchmarks/results/2026-11-27-issue-54-fixed-slot-probe.diff  # decoding.search)
    python benchmarks/results/2026-11-27-issue-54-fixed-slot-ab.py RUN [ROUNDS]
    python benchmarks/results/2026-11-27-issue-54-fixed-slot-ab.py BASE_RUN 5
    git apply -R benchmarks/results/2026-11-27-issue-54-fixed-slot-probe.diff

The diff (not on main) adds `incremental.fixed_slot_step`: the production design's
`slot_cache` in fixed-size buffers, each step's keys/values written in place, only the int32
slots reordered, and makes `decode_sources` use it under XLA. This script builds the XLA
search (`search_function(1)`, beam 4, the next-step stop) with it ("new") and with
`fixed_shape_step` ("old"), checks both give the same ids and scores as each other and the
same ids as the growing search, and times them alternated (medians). RUN with a
`sample_en_de` tokenizer: the test sentences of 5, 20 and 50 pieces; any other run: one
source of 20 pieces. A one-off study kept as the command behind
2026-11-27-issue-54-request-ops.md; not a workload.
"""

import os
import sys
import time

import numpy as np
import tensorflow as tf

from keras_transformer import SearchOptions, artifacts
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator, incremental
from keras_transformer.decoding import translator as translator_module
from keras_transformer.decoding.translator import XLA_WIDTH_MULTIPLE, pad_width


def sources(tokenizer, max_length: int, trained: bool) -> dict:
    """`{pieces: [source ids (1, width)]}`: test sentences, or one made-up source."""
    if not trained:
        return {20: [pad_width(tf.constant([list(range(7, 26)) + [2]]), XLA_WIDTH_MULTIPLE)]}
    texts = [source for source, _ in read_pairs("sample_en_de", "test")]
    chosen = {}
    for pieces in (5, 20, 50):
        found = [t for t in texts if len(tokenizer.tokenize(tf.constant([t])).flat_values)
                 == pieces][:6]  # fmt: skip
        chosen[pieces] = [
            pad_width(tokenizer.encode_source(tf.constant([t]), max_length).to_tensor(),
                      XLA_WIDTH_MULTIPLE)
            for t in found
        ]  # fmt: skip
    return chosen


def main() -> None:
    run, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 15
    model, _, tokenizer = artifacts.load_trained(run)
    trained = os.path.exists(os.path.join(run, "training_config.json"))
    alpha = artifacts.run_eval_alpha(run) if trained else 0.6
    options = SearchOptions(alpha=alpha, stop_lookahead="next", padded_decode=True)
    new = Translator(model, tokenizer, options, jit_compile=True).search_function(1)
    with_slots = translator_module.fixed_slot_step
    translator_module.fixed_slot_step = lambda model, memory, mask, length, beam, transpose: (
        incremental.fixed_shape_step(model, memory, mask, length, transpose)
    )
    old = Translator(model, tokenizer, options, jit_compile=True).search_function(1)
    translator_module.fixed_slot_step = with_slots
    growing = Translator(model, tokenizer, options.replace(padded_decode=False)).search_function(1)
    for pieces, batch in sources(tokenizer, model.config.max_length, trained).items():
        same, scores_differ, as_growing = 0, 0.0, 0
        for source in batch:
            (a, score_a), (b, score_b), (c, _) = new(source), old(source), growing(source)
            width = min(a.shape[-1], c.shape[-1])
            same += int(np.array_equal(a.numpy(), b.numpy()))
            scores_differ = max(scores_differ, float(np.abs(score_a - score_b).max()))
            as_growing += int(np.array_equal(a.numpy()[..., :width], c.numpy()[..., :width]))
        times = {"new": [], "old": []}
        for _ in range(rounds):
            for source in batch:
                for name, search in (("new", new), ("old", old)):
                    start = time.perf_counter()
                    search(source)[0].numpy()
                    times[name].append(time.perf_counter() - start)
        ms = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
        print(f"{pieces} pieces: same ids {same} of {len(batch)}, scores within "
              f"{scores_differ:.1e}, as the growing search {as_growing}; new {ms['new']:.2f} ms, "
              f"old {ms['old']:.2f} ms, old / new {ms['old'] / ms['new']:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
