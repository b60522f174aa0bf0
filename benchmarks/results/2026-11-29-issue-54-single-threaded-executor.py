"""Issue 54: `serving_default` of an export traced for TensorFlow's single-threaded executor
against the stock export, one sentence a request, alternated call by call (2026-11-29).

    python THIS export RUN DIR          # DIR/transformer/1: traced under the executor
    keras-transformer-export --model-dir RUN --export-base STOCK --jit-compile --stop-lookahead next
    python THIS ab STOCK/transformer/1 DIR/transformer/1 ROUNDS

Tracing inside `context.function_executor_type("SINGLE_THREADED_EXECUTOR")` writes that
executor into every call op of the SavedModel (`StatefulPartitionedCall`'s `executor_type`,
which TF Serving's session honours too) and keeps `If`/`While` functional (the executor
runs no Switch/Merge). `ab`: the same translations from both, then median ms of each over
ROUNDS rounds of ~5-, ~20- and ~50-piece sentences, A and B alternated, the first each other
round.
"""

import statistics
import sys
import time


def export(run: str, base: str) -> None:
    from tensorflow.python.eager import context

    from keras_transformer.cli.export import main

    with context.function_executor_type("SINGLE_THREADED_EXECUTOR"):
        main(["--model-dir", run, "--export-base", base, "--jit-compile",
              "--stop-lookahead", "next"])  # fmt: skip


SENTENCES = {
    5: ["Click the OK button.", "Select a cell.", "Save the document.", "Press Enter."],
    20: [
        "To insert a new row, select the row below it and choose Insert - Rows from the menu bar.",
        "You can change the default settings for new documents in the Options dialog box.",
    ],  # fmt: skip
    50: [
        "If you want to apply the formatting to the whole document, select the paragraphs "
        "first, then open the Format menu, choose Paragraph and set the indents and spacing on "
        "the Indents tab; the changes apply to all selected paragraphs at once."
    ],  # fmt: skip
}


def ab(a_dir: str, b_dir: str, rounds: str) -> None:
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's SentencePiece ops)

    a = tf.saved_model.load(a_dir).signatures["serving_default"]
    b = tf.saved_model.load(b_dir).signatures["serving_default"]

    def call(f, text):
        return f(text=tf.constant([text]))["translations"].numpy()[0]

    for texts in SENTENCES.values():
        for text in texts:
            for _ in range(3):
                assert call(a, text) == call(b, text), text
    times = {(n, k): [] for n in "AB" for k in SENTENCES}
    for r in range(int(rounds)):
        order = [("A", a), ("B", b)] if r % 2 else [("B", b), ("A", a)]
        for k, texts in SENTENCES.items():
            for text in texts:
                for name, f in order:
                    start = time.perf_counter()
                    call(f, text)
                    times[(name, k)].append(1e3 * (time.perf_counter() - start))
    for k in SENTENCES:
        ta, tb = (statistics.median(times[(n, k)]) for n in "AB")
        print(f"~{k} pieces: A {ta:.2f} ms  B {tb:.2f} ms  A/B {ta / tb:.3f}")


if __name__ == "__main__":
    {"export": export, "ab": ab}[sys.argv[1]](*sys.argv[2:])
