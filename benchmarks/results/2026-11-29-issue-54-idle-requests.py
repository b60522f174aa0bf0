"""Issue 54, a probe: one-sentence requests right after each other against requests after an
idle pause (a person's requests arrive so), for small calls, our export, its parts and
CTranslate2; each mode in a process of its own, medians in ms by pause.

    python benchmarks/results/2026-11-29-issue-54-idle-requests.py calibrate
    python benchmarks/results/2026-11-29-issue-54-idle-requests.py export EXPORT_DIR
    INTRA=1 INTER=1 python benchmarks/results/2026-11-29-issue-54-idle-requests.py export DIR
    python benchmarks/results/2026-11-29-issue-54-idle-requests.py parts RUN
    python benchmarks/results/2026-11-29-issue-54-idle-requests.py ctranslate2 CT2_DIR THREADS

`calibrate`: a Python loop, NumPy products and allocations, and single TensorFlow calls (an
eager add, `tf.constant`, `.numpy()`, an empty `tf.function` with and without XLA).
`export`: `serving_default` of a SavedModel (in process; `INTRA`/`INTER` set TensorFlow's
thread pools). `parts`: the XLA translator of RUN (`sample_en_de`, beam 4, the next-step
stop) as a whole request, its XLA search alone (ids in, ids out) and its tokenizer alone.
`ctranslate2`: the converted model (`export/to_ctranslate2.py`, SentencePiece `spm.model`
beside it) with `intra_threads=THREADS`, SentencePiece in Python as in the latency workload,
the run's alpha (`--alpha`, default 1.2). Six short sentences, `--rounds` passes (default
10), pauses `--pauses` ms (default 0,10,50) before every timed call.
Results: 2026-11-29-issue-54-idle-requests.md.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

TEXTS = ["The cat sat on the mat.", "Click the OK button.", "Open the file now.",
         "This is a test.", "Where is the station?", "Save your work often."]  # fmt: skip


def timed_by_pause(parts: dict, pauses: list[float], rounds: int) -> dict:
    """`{pause: {name: median ms}}`: every part once per text per round, each after `pause`
    ms of sleep, after five untimed passes."""
    for text in TEXTS * 5:
        for part in parts.values():
            part(text)
    out = {}
    for pause in pauses:
        times = {name: [] for name in parts}
        for _ in range(rounds):
            for text in TEXTS:
                for name, part in parts.items():
                    time.sleep(pause / 1e3)
                    start = time.perf_counter()
                    part(text)
                    times[name].append(time.perf_counter() - start)
        out[pause] = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
    return out


def calibrate() -> dict:
    import tensorflow as tf

    x, c, a = np.random.rand(64, 64), tf.constant(1.0), np.ones(4, np.float32)
    xla, graph = tf.function(lambda v: v + 1, jit_compile=True), tf.function(lambda v: v + 1)

    def spin(_):
        total = 0
        for i in range(25000):
            total += i
        return total

    return {
        "Python loop": spin,
        "200 NumPy 64x64 products": lambda _: [x @ x for _ in range(200)],
        "10 NumPy 800 KB arrays": lambda _: [np.empty(100000) for _ in range(10)],
        "eager add": lambda _: c + 1,
        "tf.constant": lambda _: tf.constant(a),
        ".numpy()": lambda _: c.numpy(),
        "100 eager adds": lambda _: [c + 1 for _ in range(100)],
        "empty tf.function": lambda _: graph(c).numpy(),
        "empty XLA function": lambda _: xla(c).numpy(),
    }


def export(path: str) -> dict:
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's SentencePiece ops)

    threading = tf.config.threading
    if os.environ.get("INTRA"):
        threading.set_intra_op_parallelism_threads(int(os.environ["INTRA"]))
    if os.environ.get("INTER"):
        threading.set_inter_op_parallelism_threads(int(os.environ["INTER"]))
    signature = tf.saved_model.load(path).signatures["serving_default"]
    return {"serving_default": lambda t: signature(text=tf.constant([t]))["translations"].numpy()}


def parts(run: str) -> dict:
    import tensorflow as tf

    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.translator import XLA_WIDTH_MULTIPLE, pad_width

    model, _, tokenizer = artifacts.load_trained(run)
    options = SearchOptions(alpha=artifacts.run_eval_alpha(run), stop_lookahead="next",
                            padded_decode=True)  # fmt: skip
    translator = Translator(model, tokenizer, options, jit_compile=True)
    strings = [tf.TensorSpec([None], tf.string)]
    whole = tf.function(translator.translate_tensors, input_signature=strings)
    search = translator.search_function(1)
    encode = tf.function(lambda t: tokenizer.encode_source(t, model.config.max_length).to_tensor(),
                         input_signature=strings)  # fmt: skip
    ids = {t: pad_width(encode(tf.constant([t])), XLA_WIDTH_MULTIPLE) for t in TEXTS}
    return {
        "whole request": lambda t: whole(tf.constant([t]))["translations"].numpy(),
        "XLA search alone": lambda t: search(ids[t])[0].numpy(),
        "tokenizer alone": lambda t: encode(tf.constant([t])).numpy(),
    }


def ctranslate2(path: str, threads: int, alpha: float) -> dict:
    import ctranslate2 as ct2
    import sentencepiece

    translator = ct2.Translator(path, device="cpu", compute_type="float32", inter_threads=1,
                                intra_threads=threads)  # fmt: skip
    processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(path, "spm.model"))

    def call(text):
        tokens = processor.encode([text], out_type=str)
        results = translator.translate_batch(tokens, beam_size=4, length_penalty=alpha,
                                             max_decoding_length=len(tokens[0]) + 51)  # fmt: skip
        return processor.decode([results[0].hypotheses[0]])

    return {f"CTranslate2 float32, {threads} thread(s)": call}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["calibrate", "export", "parts", "ctranslate2"])
    parser.add_argument("path", nargs="?")
    parser.add_argument("threads", nargs="?", type=int, default=1)
    parser.add_argument("--alpha", type=float, default=1.2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pauses", default="0,10,50")
    args = parser.parse_args()
    if args.mode == "calibrate":
        systems = calibrate()
    elif args.mode == "export":
        systems = export(args.path)
    elif args.mode == "parts":
        systems = parts(args.path)
    else:
        systems = ctranslate2(args.path, args.threads, args.alpha)
    pauses = [float(p) for p in args.pauses.split(",")]
    result = timed_by_pause(systems, pauses, args.rounds)
    threads = f"INTRA={os.environ.get('INTRA', '-')} INTER={os.environ.get('INTER', '-')}"
    print(f"| {args.mode} ({threads}) | " + " | ".join(f"pause {p:g} ms" for p in pauses) + " |")
    for name in systems:
        print(f"| {name} | " + " | ".join(f"{result[p][name]:.3f}" for p in pauses) + " |")


if __name__ == "__main__":
    main()
