"""Whole HTML pages through `keras-transformer-translate --markup`: line by line (each line one
input, as before) against `--whole-input` (the page one input), 2026-11-28.

    python benchmarks/results/2026-11-28-whole-pages.py --run-dir RUN_DIR

Pages: `--pages` pages built from consecutive sentences of the bundled dev split, laid out as
pages are: a title in the head, a heading, a paragraph whose two sentences span two lines, a
list of items one per line, a link with a `title`, a script and a `translate="no"` footer.
Both modes call `translate_lines`, as the command does, with one translator. Reported per
mode: pages whose tags (Python's `html.parser` events: tags, comments, code, in
order) equal the page's, pages with the page's line count, inputs warned about, BLEU
(sacrebleu) of the visible text (tags removed, in page order) against the sentences'
references, and the time of all pages (after a warm-up page).
"""

import argparse
import html
import re
import time
from html.parser import HTMLParser

import sacrebleu

from keras_transformer.data.corpus import read_pairs

LAYOUT = """<!DOCTYPE html>
<html lang="en">
<head>
  <title>{0}</title>
  <script>if (a < b) {{ show("<p>"); }}</script>
</head>
<body>
  <h1>{1}</h1>
  <p>{2}
  {3}</p>
  <ul>
    <li>{4}</li>
    <li><a href="x.html" title="{5}">{6}</a></li>
    <li>{7}</li>
  </ul>
  <p translate="no">Keras Transformer 2.0</p>
</body>
</html>
"""
PER_PAGE = 8


class _Reader(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.events, self.text, self.hidden = [], [], 0

    def handle_starttag(self, tag, attrs):
        self.events.append(tag)
        self.hidden += dict(attrs).get("translate") == "no"

    def handle_endtag(self, tag):
        self.events.append("/" + tag)

    def handle_data(self, data):
        if self.cdata_elem:
            self.events.append(data)
        elif not self.hidden:
            self.text.append(data)


def _read(page):
    reader = _Reader()
    reader.feed(page)
    return reader.events, " ".join(" ".join(reader.text).split())


def _translate(translate_lines, translator, page, whole):
    """What `keras-transformer-translate --markup [--whole-input]` prints for the page."""
    lines = [page] if whole else page.splitlines()
    start = time.perf_counter()
    outputs, _ = translate_lines(translator, lines)
    took = time.perf_counter() - start
    text = "".join(t for t, _, _ in outputs) if whole else "".join(t + "\n" for t, _, _ in outputs)
    return text, sum(bool(w) for _, _, w in outputs), took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-dir", default="runs/sample_en_de")
    parser.add_argument("--pages", type=int, default=20)
    args = parser.parse_args()
    pairs = list(read_pairs("sample_en_de", "dev"))[: args.pages * PER_PAGE]
    pages, references = [], []
    for first in range(0, len(pairs) - PER_PAGE + 1, PER_PAGE):
        chunk = pairs[first : first + PER_PAGE]
        pages.append(LAYOUT.format(*(html.escape(s) for s, _ in chunk)))
        references.append(" ".join(t for i, (_, t) in enumerate(chunk) if i != 5))
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator
    from keras_transformer.decoding.markup_translation import translate_lines

    model, _, tokenizer = artifacts.load_trained(args.run_dir)
    options = SearchOptions(alpha=artifacts.run_eval_alpha(args.run_dir))
    translator = Translator(model, tokenizer, options,
                            alignment=artifacts.run_alignment(args.run_dir))  # fmt: skip
    for whole in (False, True):
        equal_tags, equal_lines, warned, outputs, seconds = 0, 0, 0, [], 0.0
        for index, page in enumerate([pages[0], *pages]):
            out, malformed, took = _translate(translate_lines, translator, page, whole)
            if index == 0:
                continue  # warm-up: traces
            events, text = _read(out)
            equal_tags += events == _read(page)[0]
            equal_lines += out.count("\n") == page.count("\n")
            warned += malformed
            outputs.append(re.sub(r"\s+", " ", text))
            seconds += took
        bleu = sacrebleu.corpus_bleu(outputs, [references]).score
        print(f"{'whole input' if whole else 'line by line'}: pages {len(outputs)}, "
              f"tags equal {equal_tags}, line count equal {equal_lines}, warned {warned}, "
              f"BLEU {bleu:.2f}, {seconds:.1f} s")  # fmt: skip
        print(out)


if __name__ == "__main__":
    main()
