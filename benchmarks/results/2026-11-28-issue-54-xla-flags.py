"""Issue 54, a probe (not kept): the XLA search of one sentence under XLA's CPU compiler flags,
one process per flag set (XLA reads `XLA_FLAGS` once per process), each printing its medians.

    for pass in 1 2 3 4 5 6; do for k in default noxnn xnngraph onednn; do
        XLA_FLAGS="${FLAGS[$k]}" python THIS RUN 20 $k
    done; done

RUN: a `sample_en_de` run; sentences as 2026-11-27-issue-54-fixed-slot-ab.py picks them (6
test sentences of 5, 20 and 50 pieces); ROUNDS passes over them, timed call by call. The ids
of every source go to TAG.PID.json in the working directory, to be compared across flag sets.
Results and the flags: 2026-11-28-issue-54-xla-flags.md.
"""

import importlib
import json
import os
import sys
import time

import numpy as np

from keras_transformer import SearchOptions, artifacts
from keras_transformer.decoding import Translator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ab = importlib.import_module("2026-11-27-issue-54-fixed-slot-ab")


def main() -> None:
    run, rounds, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    model, _, tokenizer = artifacts.load_trained(run)
    options = SearchOptions(
        alpha=artifacts.run_eval_alpha(run), stop_lookahead="next", padded_decode=True
    )
    sources = ab.sources(tokenizer, model.config.max_length, trained=True)
    search = Translator(model, tokenizer, options, jit_compile=True).search_function(1)
    ids = {}
    for pieces, batch in sources.items():
        for i, source in enumerate(batch):
            ids[f"{pieces}_{i}"] = search(source)[0].numpy().tolist()
    medians = {}
    for pieces, batch in sources.items():
        times = []
        for _ in range(rounds):
            for source in batch:
                start = time.perf_counter()
                search(source)[0].numpy()
                times.append(time.perf_counter() - start)
        medians[pieces] = 1e3 * float(np.median(times))
    print(tag, " ".join(f"{p}:{m:.2f}" for p, m in medians.items()), flush=True)
    with open(f"{tag}.{os.getpid()}.json", "w") as f:
        json.dump({"tag": tag, "ms": medians, "ids": ids}, f)


if __name__ == "__main__":
    main()
