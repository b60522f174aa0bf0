"""A sentence that recurs in a batch, searched once: before and after, three workloads.

    git worktree add /tmp/before_unique 6d1c6f2
    PYTHONPATH=/tmp/before_unique python THIS RUN before   # writes before.*.txt, prints times
    python THIS RUN after
    (THIS: benchmarks/results/2026-11-28-repeated-sentences.py; RUN: the default run's dir)

Workloads, each timed as the second of two passes (the first traces), one translator:
- tagged: `translate_lines` with markup (what `--markup` runs) on the bundled tagged dev sets
  (460 + 36 inputs; documentation repeats itself: 698 sentences, 608 distinct);
- test: `Translator.translate` on the 1,288 test sources (the plain path; few repeats);
- pages: `--pages` product-list pages as one input each (`--whole-input`), each of 10 items:
  a dev sentence, an image whose `alt` repeats the product line's label, and the same three
  button and stock labels on every item.
Outputs go to `{tag}.{workload}.txt` beside the working directory, to compare byte for byte.
"""

import sys
import time
from pathlib import Path

from keras_transformer.data.corpus import read_pairs

ITEM = (
    '<li class="item"><img src="p{i}.png" alt="Product photo"> <p>{text}</p>'
    '<button title="Add this product to your cart">Add to cart</button> '
    '<a href="p{i}.html">Show details</a> <span class="stock">In stock.</span></li>'
)


def pages(count: int) -> list[str]:
    dev = [s for s, _ in read_pairs("sample_en_de", "dev")]
    return ["<ul>" + "".join(ITEM.format(i=i, text=dev[10 * p + i]) for i in range(10)) + "</ul>"
            for p in range(count)]  # fmt: skip


def timed(function, inputs):
    function(inputs)  # traces
    start = time.perf_counter()
    out = function(inputs)
    return out, time.perf_counter() - start


def main(run: str, tag: str, count: int = 20) -> None:
    import importlib.util

    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_translation import translate_lines

    here = Path(__file__).with_name("2026-11-28-edge-punctuation.py")
    spec = importlib.util.spec_from_file_location("edges_script", here)
    edges_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(edges_script)
    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)),
                            alignment=artifacts.run_alignment(run))  # fmt: skip
    tagged = [s for s, _ in edges_script.pairs()]
    test = [s for s, _ in read_pairs("sample_en_de", "test")]
    workloads = {
        "tagged": (lambda x: [t for t, _, _ in translate_lines(translator, x)[0]], tagged),
        "test": (lambda x: translator.translate(x)[0], test),
        "pages": (lambda x: [t for t, _, _ in translate_lines(translator, x)[0]], pages(count)),
    }
    for name, (function, inputs) in workloads.items():
        out, seconds = timed(function, inputs)
        Path(f"{tag}.{name}.txt").write_text("".join(o.replace("\n", " ") + "\n" for o in out))
        print(f"{tag} {name}: {len(inputs)} inputs, {seconds:.2f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
