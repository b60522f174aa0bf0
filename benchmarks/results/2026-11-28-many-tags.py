"""Pages with many tags through the markup path: the covers' range tables against the
(batch, tags, output words) cube, and the tag limit (`markup.MAX_TAGS`) chosen (2026-11-28).

    python benchmarks/results/2026-11-28-many-tags.py TAGS MAX_TAGS ITEMS BATCH
    PYTHONPATH=/tmp/before python benchmarks/results/2026-11-28-many-tags.py TAGS 256 40 31
    python benchmarks/results/2026-11-28-many-tags.py PAGE MAX_TAGS ITEMS --run-dir RUN_DIR

TAGS: `parse_markup` and `insert_tags` (traced) on BATCH copies of a page of ITEMS list items
(6 tags and 5 words each) beside one plain input of 20,000 words, each output word aligned
to its own source word: min time of 3 and the process's peak RSS (TensorFlow itself: ~0.9 GB).
PAGE: `translate_markup` with a trained model on one page whose ITEMS list items each hold a
dev sentence in a link and a bold number: min time of 2 after a warm-up, tags in and out.
"""

import argparse
import re
import resource
import time

import numpy as np
import tensorflow as tf

from keras_transformer.data import markup as mk


def _limit(value):
    mk.MAX_TAGS = value
    mk.TOO_MANY = f"more than {value} tags: translated without them"


def tags(items, batch):
    page = "".join(f'<li><a href="/p{i}">Item <b>{i}</b> here</a> and more.</li>'
                   for i in range(items))  # fmt: skip
    texts = [f"<ul>{page}</ul>"] * batch + ["word " * 20000]
    parse, insert = tf.function(mk.parse_markup), tf.function(mk.insert_tags)
    parsed = parse(tf.constant(texts))
    words = [len(t.split()) for t in parsed.text.numpy()]
    links = tf.ragged.constant([np.arange(n) for n in words], tf.int32).to_tensor(-1)
    translations = [" ".join(f"w{i}" for i in range(n)) for n in words]
    insert(parsed, translations, links)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        parsed = parse(tf.constant(texts))
        insert(parsed, translations, links)
        times.append(time.perf_counter() - start)
    warned = sum(bool(w) for w in parsed.warnings.numpy())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"MAX_TAGS {mk.MAX_TAGS}, {6 * items + 2} tags a page, {batch} pages + 1 plain: "
          f"warned {warned}, {1000 * min(times):.0f} ms, peak RSS {rss:.0f} MB")  # fmt: skip


def page(items, run_dir):
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.data.corpus import read_pairs
    from keras_transformer.decoding import Translator

    sentences = [s for s, _ in read_pairs("sample_en_de", "dev")][:items]
    text = "<ul>" + "".join(f'<li><a href="/p{i}">{s}</a> <b>{i}</b></li>'
                            for i, s in enumerate(sentences)) + "</ul>"  # fmt: skip
    model, _, tokenizer = artifacts.load_trained(run_dir)
    options = SearchOptions(alpha=artifacts.run_eval_alpha(run_dir))
    function = tf.function(Translator(model, tokenizer, options).translate_markup_tensors)
    function(tf.constant([text]))
    times = []
    for _ in range(2):
        start = time.perf_counter()
        out = function(tf.constant([text]))
        times.append(time.perf_counter() - start)
    result = out["translations"][0].numpy().decode()
    words = len(re.sub(mk.TAG, " ", text).split())
    print(f"MAX_TAGS {mk.MAX_TAGS}: {len(re.findall(mk.TAG, text))} tags, {words} words; "
          f"{len(re.findall(mk.TAG, result))} tags out, {min(times):.2f} s, "
          f"warning {out['warnings'][0].numpy().decode()!r}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["TAGS", "PAGE"])
    parser.add_argument("limit", type=int)
    parser.add_argument("items", type=int)
    parser.add_argument("batch", type=int, nargs="?", default=1)
    parser.add_argument("--run-dir", default="runs/sample_en_de")
    args = parser.parse_args()
    _limit(args.limit)
    tags(args.items, args.batch) if args.mode == "TAGS" else page(args.items, args.run_dir)


if __name__ == "__main__":
    main()
