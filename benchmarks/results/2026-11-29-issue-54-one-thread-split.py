"""Issue 54: where one sentence's request of the XLA translator goes with one intra-op thread.

    TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 PYTHONPATH=. \\
        python benchmarks/results/2026-11-29-issue-54-one-thread-split.py RUN [ROUNDS]

1. `fit`: the XLA translator of RUN (beam 4, the next-step stop, the run's alpha): its
   `translate_tensors` in a `tf.function` ("whole"), its XLA search on the padded source ids
   ("search") and an empty string `tf.function` ("call"), alternated over ROUNDS (default 20)
   rounds of 6 test sentences of ~5, ~20 and ~50 pieces, medians in ms, with the loop steps
   each search takes (the growing search's output width). A line through the three
   (steps, search) points gives the search's cost a step and its fixed cost.
2. `profile`: 50 searches of one ~5-piece sentence under `tf.profiler`; the host plane's
   events summed per call: Python's `tf.function` call, TensorFlow's launch of the XLA
   executable, the kernels before the loop (the largest named), and the loop's kernels
   (thunks) a step, by duration and by kind.
3. `floor`: the p50 of a call of a trivial SavedModel signature (strings in, strings out) from
   Python, 2000 calls.
A one-off study kept as the command behind 2026-11-29-issue-54-one-thread-split.md; not a
workload.
"""

import collections
import glob
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from benchmarks.latency_benchmark import pick_sentences
from keras_transformer import SearchOptions, artifacts, malloc
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator
from keras_transformer.decoding.search import pad_rows

PROFILED_CALLS = 50


def fit(model, tokenizer, options, rounds: int) -> None:
    translator = Translator(model, tokenizer, options, jit_compile=True)
    growing = Translator(model, tokenizer, options.replace(padded_decode=False))
    spec = [tf.TensorSpec([None], tf.string)]
    systems = {
        "whole": tf.function(translator.translate_tensors, input_signature=spec),
        "search": translator.search_function(1),
        "call": tf.function(tf.strings.length, input_signature=spec),
    }
    texts = [source for source, _ in read_pairs("sample_en_de", "test")]

    def count(text):
        return int(tokenizer.tokenize(tf.constant([text])).row_lengths()[0])

    points = []
    for length in (5, 20, 50):
        sentences = pick_sentences(texts, count, length, 6)
        sources = [tokenizer.encode_source(tf.constant([t]), model.config.max_length).to_tensor()
                   for t in sentences]  # fmt: skip
        ids = [pad_rows(translator._xla_width(source)) for source in sources]
        steps = [int(growing.search_function(1)(s)[0].shape[-1]) - 1 for s in sources]
        args = {"whole": [tf.constant([t]) for t in sentences], "search": ids,
                "call": [tf.constant([t]) for t in sentences]}  # fmt: skip
        for name, function in systems.items():  # traces each new width once
            for arg in args[name]:
                function(arg)
        times = {name: [] for name in systems}
        for _ in range(rounds):
            for i in range(len(sentences)):
                for name, function in systems.items():
                    start = time.perf_counter()
                    tf.nest.map_structure(lambda x: x.numpy(), function(args[name][i]))
                    times[name].append(time.perf_counter() - start)
        ms = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
        points.append((float(np.mean(steps)), ms["search"]))
        print(f"fit ~{length} pieces: loop steps {steps} (mean {np.mean(steps):.1f}); "
              + ", ".join(f"{k} {v:.3f} ms" for k, v in ms.items()), flush=True)  # fmt: skip
    slope, intercept = np.polyfit(*zip(*points), 1)
    print(f"fit: search = {intercept:.3f} ms + {slope:.3f} ms a loop step", flush=True)


def host_events(directory: str) -> tuple[dict, dict]:
    """The host plane's events of the trace in `directory`: `{line: {name: [durations us]}}`
    for the Python thread and the kernels' (Eigen pool's) thread."""
    path = sorted(glob.glob(f"{directory}/**/*.xplane.pb", recursive=True))[-1]
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    lines = {"python": collections.defaultdict(list), "kernels": collections.defaultdict(list)}
    for line in plane.lines:
        key = "python" if line.name == "python" else "kernels" if "Eigen" in line.name else None
        if key is None:
            continue
        for event in line.events:
            name = plane.event_metadata[event.metadata_id].name
            lines[key][name].append(event.duration_ps / 1e6)
    return lines["python"], lines["kernels"]


def profile(model, tokenizer, options) -> None:
    translator = Translator(model, tokenizer, options, jit_compile=True)
    search = translator.search_function(1)
    source = tokenizer.encode_source(tf.constant(["The house is small and old."]), 1000)
    ids = pad_rows(translator._xla_width(source.to_tensor()))
    for _ in range(20):
        search(ids)
    directory = tempfile.mkdtemp()
    tf.profiler.experimental.start(directory)
    for _ in range(PROFILED_CALLS):
        search(ids)[0].numpy()
    tf.profiler.experimental.stop()
    python, kernels = host_events(directory)

    def per_call(events, name):
        return sum(events[name]) / PROFILED_CALLS

    whiles = [n for n in kernels if n.startswith("while")]
    loop_name = max(whiles, key=lambda n: per_call(kernels, n))
    repeats = collections.Counter(  # the loop body's kernels: the most common count > 1
        len(d) // PROFILED_CALLS for d in kernels.values() if len(d) > PROFILED_CALLS
    )
    steps = repeats.most_common(1)[0][0]
    in_loop = {n: per_call(kernels, n) / steps for n, d in kernels.items()
               if len(d) == steps * PROFILED_CALLS and n != "ThunkExecutor::Execute"}  # fmt: skip
    before = {n: per_call(kernels, n) for n, d in kernels.items()
              if len(d) == PROFILED_CALLS and n not in whiles}  # fmt: skip
    call = max(python, key=lambda n: per_call(python, n))
    execute = per_call(python, "TFE_Py_ExecuteCancelable")
    xla = per_call(python, "CpuExecutable::ExecuteAsyncOnStream")
    print(f"profile ({steps} loop steps, us a call): Python's call {per_call(python, call):.0f}, "
          f"of which TensorFlow's execute {execute:.0f}, of which XLA's executable {xla:.0f}: "
          f"kernels before the loop {sum(before.values()):.0f} ({len(before)}), the loop "
          f"{per_call(kernels, loop_name):.0f}", flush=True)  # fmt: skip
    for name, us in sorted(before.items(), key=lambda x: -x[1])[:3]:
        print(f"profile: before the loop, {name} {us:.0f} us", flush=True)
    durations = np.array(list(in_loop.values()))
    print(f"profile: the loop's kernels a step: {len(durations)}, {durations.sum():.0f} us",
          flush=True)  # fmt: skip
    for low, high in ((0, 0.5), (0.5, 1), (1, 2), (2, 5), (5, np.inf)):
        inside = (durations >= low) & (durations < high)
        print(f"profile: a step's kernels of {low}-{high} us: {inside.sum()}, "
              f"{durations[inside].sum():.1f} us", flush=True)  # fmt: skip
    kinds = collections.Counter()
    for name, us in in_loop.items():
        kinds[name.split(".")[0].removeprefix("end: ").rstrip("_0123456789")] += us
    for kind, us in kinds.most_common(12):
        print(f"profile: a step's {kind} kernels {us:.1f} us", flush=True)


class Trivial(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(self, text):
        return {"translations": tf.strings.upper(text), "scores": tf.zeros(tf.shape(text))}


def floor() -> None:
    directory = os.path.join(tempfile.mkdtemp(), "trivial")
    module = Trivial()
    tf.saved_model.save(module, directory, signatures={"serving_default": module.serve})
    signature = tf.saved_model.load(directory).signatures["serving_default"]
    times = []
    for i in range(2050):
        start = time.perf_counter()
        signature(text=tf.constant(["The house is small and old."]))["translations"].numpy()
        if i >= 50:
            times.append(time.perf_counter() - start)
    print(f"floor: a trivial signature's call from Python, p50 {1e6 * np.median(times):.0f} us",
          flush=True)  # fmt: skip


def main() -> None:
    malloc.keep_freed_memory()
    run = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    model, _, tokenizer = artifacts.load_trained(run)
    options = SearchOptions(
        alpha=artifacts.run_eval_alpha(run), stop_lookahead="next", padded_decode=True
    )
    fit(model, tokenizer, options, rounds)
    profile(model, tokenizer, options)
    floor()


if __name__ == "__main__":
    main()
