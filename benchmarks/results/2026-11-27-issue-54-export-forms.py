"""Issue 54's decision, measured: the three forms a bfloat16 export could take.

    python benchmarks/results/2026-11-27-issue-54-export-forms.py RUN OUT

  A  a separate bfloat16 export (what `--dtype bfloat16` builds) beside the float32 one;
  B  one export with both sets of signatures (float32 and bfloat16 weights; the bfloat16
     signatures under keys ending "_bfloat16");
  C  float32 weights with bfloat16 products by a cast inside the graph (Keras'
     "mixed_bfloat16" policy casts each weight where a layer reads it: the numbers a cast at
     load would give, paid on every search step; TF Serving runs no code of ours at load).

Part 1, the trained run RUN (its exports written under OUT): each export's size on disk and
load time (fresh process, best of 2), and sentences/s of `serving_default` on the first 512
test sentences in batches of 64 (3 rounds, alternating). Part 2, base size with random
weights: the search alone (`search_ids`, at most source + 10 pieces), bfloat16 weights
against the cast (C) and float32, batch 64 and 1, alternating in one process. A one-off
study kept as the command behind the results in 2026-11-27-issue-54-bfloat16-units.md
("The bfloat16 export's form, measured"); not a workload.
"""

import os
import subprocess
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import SearchOptions, TransformerConfig, artifacts, build_transformer
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding.search import search_ids
from keras_transformer.serving.export import (
    export_info,
    export_savedmodel,
    make_translator,
    save_module,
)
from keras_transformer.serving.translation_module import TranslationModule


def module_for(run: str, search: SearchOptions, dtype: str) -> TranslationModule:
    config = artifacts.load_config(run)
    model = build_transformer(config, dtype=dtype)
    artifacts.restore_weights(model, run, None)
    tokenizer = artifacts.SubwordTokenizer.from_file(artifacts.path(run, artifacts.TOKENIZER_FILE))
    return TranslationModule(make_translator(model, tokenizer, search), model, tokenizer, 4)


def build_exports(run: str, out: str) -> dict:
    search = SearchOptions(alpha=artifacts.run_eval_alpha(run))
    paths = {
        "A float32": export_savedmodel(run, out, "a32", 1, search=search),
        "A bfloat16": export_savedmodel(run, out, "a16", 1, search=search, dtype="bfloat16"),
    }
    both = tf.Module()
    both.f32 = module_for(run, search, "float32")
    both.bf16 = module_for(run, search, "bfloat16")
    signatures = dict(both.f32.signatures())
    signatures.update({k + "_bfloat16": v for k, v in both.bf16.signatures().items()})
    paths["B both"] = os.path.join(out, "both", "1")
    tf.saved_model.save(both, paths["B both"], signatures=signatures)
    cast = module_for(run, search, "mixed_bfloat16")
    info = export_info(cast.translator, "mixed_bfloat16")
    paths["C cast in graph"] = save_module(cast, out, "cast", 1, info=info)
    return paths


def megabytes(directory: str) -> float:
    files = [os.path.join(root, f) for root, _, names in os.walk(directory) for f in names]
    return sum(os.path.getsize(f) for f in files) / 1e6


def load_seconds(path: str) -> float:
    code = ("import time, tensorflow as tf, tensorflow_text; s = time.perf_counter(); "
            f"tf.saved_model.load({path!r}); print(time.perf_counter() - s)")  # fmt: skip
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
            for _ in range(2)]  # fmt: skip
    return min(float(r.stdout.split()[-1]) for r in runs)


def export_speeds(paths: dict) -> None:
    texts = [source for source, _ in read_pairs("sample_en_de", "test")][:512]
    chunks = [texts[i : i + 64] for i in range(0, len(texts), 64)]
    loaded = {name: tf.saved_model.load(path).signatures for name, path in paths.items()}
    systems = {name: s["serving_default"] for name, s in loaded.items()}
    systems["B, its bfloat16 signature"] = loaded["B both"]["serving_default_bfloat16"]
    seconds, outputs = {name: [] for name in systems}, {}
    for call in systems.values():
        call(text=tf.constant(chunks[0]))
    for round_ in range(3):
        for name in list(systems)[:: 1 if round_ % 2 == 0 else -1]:
            start, out = time.perf_counter(), []
            for chunk in chunks:
                out += list(systems[name](text=tf.constant(chunk))["translations"].numpy())
            seconds[name].append(time.perf_counter() - start)
            outputs[name] = out
    for name in systems:
        same = sum(a == b for a, b in zip(outputs[name], outputs["A bfloat16"]))
        rate = len(texts) / np.median(seconds[name])
        print(f"{name}: {rate:.2f} sentences/s, as A bfloat16: {same} of {len(texts)}")


def base_search_speeds() -> None:
    keras.utils.set_random_seed(1)
    config = TransformerConfig.base(vocab_size=8000)
    reference = build_transformer(config)
    options = SearchOptions(max_extra_length=10)
    functions = {}
    for dtype in ("float32", "bfloat16", "mixed_bfloat16"):
        model = build_transformer(config, dtype=dtype)
        model.set_weights(reference.get_weights())
        functions[dtype] = tf.function(lambda s, m=model: search_ids(m, s, options))
    for batch, rounds in ((64, 5), (1, 12)):
        ids = np.random.default_rng(0).integers(4, 8000, size=(batch, 24))
        ids[:, -1] = 3  # EOS
        source = tf.constant(ids, tf.int32)  # (batch, 24)
        times = {dtype: [] for dtype in functions}
        for function in functions.values():
            function(source)
        for round_ in range(rounds):
            for dtype in list(functions)[:: 1 if round_ % 2 == 0 else -1]:
                start = time.perf_counter()
                functions[dtype](source)
                times[dtype].append(time.perf_counter() - start)
        ms = {dtype: 1e3 * np.median(t) for dtype, t in times.items()}
        print(f"base, batch {batch}: " + ", ".join(f"{d} {v:.0f} ms" for d, v in ms.items()))
        print(f"  C / A (cast / bfloat16 weights): {ms['mixed_bfloat16'] / ms['bfloat16']:.3f}")


def main(run: str, out: str) -> None:
    paths = build_exports(run, out)
    for name, path in paths.items():
        variables = megabytes(os.path.join(path, "variables"))
        print(f"{name}: {megabytes(path):.1f} MB on disk ({variables:.1f} MB variables/), "
              f"load {load_seconds(path):.1f} s")  # fmt: skip
    export_speeds(paths)
    base_search_speeds()


if __name__ == "__main__":
    main(*sys.argv[1:3])
