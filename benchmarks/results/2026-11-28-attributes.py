"""Attribute values a reader sees (`alt`, `title`, ...) through `translate_markup`, before and
after they were translated (2026-11-28).

    python benchmarks/results/2026-11-28-attributes.py --run-dir RUN_DIR
    PYTHONPATH=/tmp/before python benchmarks/results/2026-11-28-attributes.py --run-dir RUN_DIR

Inputs: consecutive pairs (S1, S2) of the bundled dev split (the first `--pairs` sentences),
each written as a page writes an image with its description and a linked sentence:
`<img src="i.png" alt="S2"> <a href="p.html" title="S2">S1</a>`. Reported: BLEU (sacrebleu)
of the `alt` and of the `title` values against R2, of the text (tags removed) against R1,
outputs whose tags are the input's tags with only `alt`/`title` values changed, and the time
of all batches (32 inputs a batch, after one warm-up batch).
"""

import argparse
import html
import re
import time

import sacrebleu
import tensorflow as tf

from keras_transformer import SearchOptions, artifacts
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-dir", default="runs/sample_en_de")
    parser.add_argument("--pairs", type=int, default=300)
    args = parser.parse_args()
    pairs = list(read_pairs("sample_en_de", "dev"))[: args.pairs]
    inputs, r1, r2 = [], [], []
    for i in range(0, len(pairs) - 1, 2):
        (s1, t1), (s2, t2) = pairs[i], pairs[i + 1]
        value = html.escape(s2)
        inputs.append(f'<img src="i.png" alt="{value}"> <a href="p.html" title="{value}">'
                      f"{html.escape(s1, quote=False)}</a>")  # fmt: skip
        r1.append(t1)
        r2.append(t2)
    model, _, tokenizer = artifacts.load_trained(args.run_dir)
    options = SearchOptions(alpha=artifacts.run_eval_alpha(args.run_dir))
    markup = tf.function(Translator(model, tokenizer, options).translate_markup_tensors)
    markup(tf.constant(inputs[:32]))
    out, start = [], time.perf_counter()
    for first in range(0, len(inputs), 32):
        result = markup(tf.constant(inputs[first : first + 32]))
        out += [t.decode() for t in result["translations"].numpy()]
    seconds = time.perf_counter() - start
    alts = [html.unescape(re.search(r'alt="([^"]*)"', o).group(1)) for o in out]
    titles = [html.unescape(re.search(r'title="([^"]*)"', o).group(1)) for o in out]
    texts = [html.unescape(" ".join(re.sub(r"<[^>]+>", " ", o).split())) for o in out]

    def skeleton(text):  # the tags with alt and title values blanked
        return re.sub(r'(alt|title)="[^"]*"', r'\1=""', " ".join(re.findall(r"<[^>]+>", text)))

    same_tags = sum(skeleton(o) == skeleton(i) for i, o in zip(inputs, out))
    bleu = {
        name: sacrebleu.corpus_bleu(hyp, [ref]).score
        for name, hyp, ref in (("alt", alts, r2), ("title", titles, r2), ("text", texts, r1))
    }
    print(
        f"inputs {len(inputs)}: BLEU alt {bleu['alt']:.2f}, title {bleu['title']:.2f}, "
        f"text {bleu['text']:.2f}; tags otherwise equal {same_tags}; {seconds:.1f} s"
    )
    print("example:", inputs[0], "->", out[0])


if __name__ == "__main__":
    main()
