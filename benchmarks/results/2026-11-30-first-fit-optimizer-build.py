"""The first `model.fit` of README's "Use the layers and the model" example, with and without
building the optimizer before it, each in a fresh process (tracing is cached per process).

    PYTHONPATH=. python benchmarks/results/2026-11-30-first-fit-optimizer-build.py [PRESET] [ROUNDS]

Without a distribution strategy, Keras 3's TensorFlow trainer builds the optimizer inside the
first trace of the train step; `tf.function` then traces the step again, because the first
trace created variables. `model.optimizer.build(model.trainable_variables)` before `fit` moves
that to eager code, so the step is traced once. Prints the first `fit`'s seconds (4 steps of
16 x 32 random tokens, vocabulary 4000) and how many times `train_step` was traced.
"""

import subprocess
import sys

import numpy as np

CHILD = """
import os, sys, time
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import keras, numpy as np, tensorflow as tf
from keras_transformer import TransformerConfig, build_transformer
from keras_transformer.training.losses import MaskedLabelSmoothedCrossEntropy, MaskedAccuracy
from keras_transformer.training.schedule import TransformerSchedule

config = TransformerConfig.preset(sys.argv[1], vocab_size=4000)
model = build_transformer(config)
model.compile(
    optimizer=keras.optimizers.Adam(TransformerSchedule(config.d_model, 4000), 0.9, 0.98, 1e-9),
    loss=MaskedLabelSmoothedCrossEntropy(label_smoothing=0.1),
    metrics=[MaskedAccuracy()],
)
traces = []
step = model.train_step
model.train_step = lambda data: traces.append(1) or step(data)
rng = np.random.default_rng(0)
source, target = (rng.integers(4, 4000, (16, 32)).astype("int32") for _ in range(2))
data = tf.data.Dataset.from_tensors(({"source": source, "target": target}, target)).repeat(4)
start = time.perf_counter()
if sys.argv[2] == "1":
    model.optimizer.build(model.trainable_variables)
model.fit(data, epochs=1, verbose=0)
print("RESULT", time.perf_counter() - start, len(traces))
"""


def first_fit(preset: str, build: bool) -> tuple[float, int]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, preset, "1" if build else "0"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    seconds, traces = done.stdout.split("RESULT")[-1].split()
    return float(seconds), int(traces)


def main(preset: str, rounds: int) -> None:
    results = {False: [], True: []}
    for r in range(rounds):
        for build in (False, True):  # alternated
            results[build].append(first_fit(preset, build))
            print(r, "built first" if build else "as README", results[build][-1], flush=True)
    print(f"\n| {preset}: optimizer | first fit s (median) | each round | train_step traces |")
    print("|---|---:|---|---:|")
    for build, rows in results.items():
        seconds = [s for s, _ in rows]
        print(f"| {'built before fit' if build else 'built by fit (as Keras does)'} | "
              f"{np.median(seconds):.1f} | {', '.join(f'{s:.1f}' for s in seconds)} | "
              f"{rows[0][1]} |")  # fmt: skip
    ratio = np.median([s for s, _ in results[False]]) / np.median([s for s, _ in results[True]])
    print(f"\nbuilt by fit / built before: {ratio:.2f}x")


if __name__ == "__main__":
    preset = sys.argv[1] if len(sys.argv) > 1 else "quick"
    main(preset, int(sys.argv[2]) if len(sys.argv) > 2 else 3)
