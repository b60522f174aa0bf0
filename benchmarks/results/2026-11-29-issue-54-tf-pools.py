"""Issue 54: one-sentence requests of an export with TensorFlow's intra-op and inter-op pools
as set in the environment (one process per setting: TensorFlow sizes them once).

    for pools in "2 2" "1 1" "2 1" "1 2"; do set -- $pools
        TF_NUM_INTRAOP_THREADS=$1 TF_NUM_INTEROP_THREADS=$2 \
            python benchmarks/results/2026-11-29-issue-54-tf-pools.py EXPORT
    done

`serving_default` of EXPORT (loaded in this process, glibc's malloc set as the package's
commands set it), four short test sentences (~5 pieces) and two of ~20, each warmed 10
times, then 40 rounds of each group with no pause and with 20 ms of sleep before each
request; medians in ms, one JSON line. A one-off study kept as the command behind
2026-11-29-issue-54-our-threads.md; not a workload (`serving single --our-threads` is).
"""

import json
import os
import sys
import time

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401

from keras_transformer import malloc

TEXTS = {
    5: ["The house is small.", "Thank you very much.", "I agree with you.", "This is not true."],
    20: ["I would like to thank the Commissioner for his answer to the question.",
         "The European Union must act now to protect its citizens from this threat."],
}  # fmt: skip


def main() -> None:
    malloc.keep_freed_memory()
    signature = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
    medians = {}
    for length, texts in TEXTS.items():
        for text in texts:
            for _ in range(10):
                signature(text=tf.constant([text]))
        for idle in (0.0, 0.02):
            times = []
            for _ in range(40):
                for text in texts:
                    if idle:
                        time.sleep(idle)
                    start = time.perf_counter()
                    signature(text=tf.constant([text]))["translations"].numpy()
                    times.append(time.perf_counter() - start)
            medians[f"{length} pieces, idle {idle * 1e3:.0f} ms"] = round(
                1e3 * float(np.median(times)), 2
            )
    pools = {name: os.environ.get(name) for name in ("TF_NUM_INTRAOP_THREADS",
                                                      "TF_NUM_INTEROP_THREADS")}  # fmt: skip
    print(json.dumps(dict(pools=pools, ms=medians)))


if __name__ == "__main__":
    main()
