"""Elements a web page keeps out of translation, through `translate_markup`, before and after
the parser learned them: `<script>`/`<style>` (raw text), `translate="no"` and the
`notranslate` class, and comments with markup inside (2026-11-28).

    git worktree add /tmp/before b770cf5
    python benchmarks/results/2026-11-28-hidden-elements.py RUN            # this checkout
    PYTHONPATH=/tmp/before python benchmarks/results/2026-11-28-hidden-elements.py RUN
    python benchmarks/results/2026-11-28-hidden-elements.py PARSE          # and with PYTHONPATH

RUN: the first `--sentences` sentences S of the bundled dev split, each sent three ways:
`script`: S's first word, then `<script>if (a<b) show("<p>");</script>`, then the rest;
`notranslate`: `S <span class="notranslate">Acme Cloud&trade; 2.0</span>`;
`comment`: a comment `<!-- v2<br>draft -->` before S's last word.
Reported per way: inputs warned about (translated as text), outputs holding the element
byte for byte exactly once, and BLEU (sacrebleu) against S's reference of the output with
that element and then every tag removed; beside it S sent plain.

PARSE: `parse_markup` over the bundled tagged dev sets (890 inputs, batches of 64): a hash of
every output (texts, tags, word positions, warnings) and the median time of 20 passes.
"""

import argparse
import hashlib
import html
import re
import time

import numpy as np
import tensorflow as tf

SCRIPT = '<script>if (a<b) show("<p>");</script>'
SPAN = '<span class="notranslate">Acme Cloud&trade; 2.0</span>'
COMMENT = "<!-- v2<br>draft -->"


def _ways(sentence):
    words = sentence.split(" ")
    return {
        "script": " ".join([words[0] + SCRIPT] + words[1:]),
        "notranslate": f"{sentence} {SPAN}",
        "comment": " ".join(words[:-1] + [COMMENT + words[-1]]),
    }


def run(run_dir, sentences):
    import sacrebleu

    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.data.corpus import read_pairs
    from keras_transformer.decoding import Translator

    pairs = list(read_pairs("sample_en_de", "dev"))[:sentences]
    refs = [r for _, r in pairs]
    model, _, tokenizer = artifacts.load_trained(run_dir)
    options = SearchOptions(alpha=artifacts.run_eval_alpha(run_dir))
    translator = Translator(model, tokenizer, options)
    markup = tf.function(translator.translate_markup_tensors)
    plain = translator.translate([s for s, _ in pairs])[0]
    print(f"plain: BLEU {sacrebleu.corpus_bleu(plain, [refs]).score:.2f}")
    for way, element in (("script", SCRIPT), ("notranslate", SPAN), ("comment", COMMENT)):
        inputs = [_ways(s)[way] for s, _ in pairs]
        out, warned = [], 0
        for start in range(0, len(inputs), 32):
            result = markup(tf.constant(inputs[start : start + 32]))
            out += [t.decode() for t in result["translations"].numpy()]
            warned += sum(bool(w) for w in result["warnings"].numpy())
        kept = sum(o.count(element) == 1 for o in out)
        visible = [re.sub(r"<!--.*?-->|<[^>]+>", " ", o.replace(element, " ")) for o in out]
        visible = [" ".join(html.unescape(v).split()) for v in visible]
        bleu = sacrebleu.corpus_bleu(visible, [refs]).score
        print(f"{way}: inputs {len(inputs)}, warned {warned}, element back once {kept}, "
              f"BLEU {bleu:.2f}; e.g. {inputs[1]!r} -> {out[1]!r}")  # fmt: skip


def parse():
    import gzip

    from keras_transformer.data.markup import parse_markup

    texts = []
    for name in ("en_de", "en_fr"):
        with gzip.open(f"keras_transformer/data/sample/{name}.dev.tagged.tsv.gz", "rt") as f:
            texts += [line.split("\t")[0] for line in f]
    function = tf.function(parse_markup, input_signature=[tf.TensorSpec([None], tf.string)])
    batches = [tf.constant(texts[i : i + 64]) for i in range(0, len(texts), 64)]
    digest, times = hashlib.sha256(), []
    for batch in batches:
        out = function(batch)
        for field in ("text", "tags", "first", "last", "warnings"):
            value = getattr(out, field)
            value = value.to_list() if isinstance(value, tf.RaggedTensor) else value.numpy()
            digest.update(repr(value).encode())
    for _ in range(20):
        start = time.perf_counter()
        for batch in batches:
            function(batch)
        times.append(time.perf_counter() - start)
    print(f"inputs {len(texts)}: hash {digest.hexdigest()[:16]}, "
          f"parse {1000 * np.median(times):.1f} ms for all (median of 20)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["RUN", "PARSE"])
    parser.add_argument("--run-dir", default="runs/sample_en_de")
    parser.add_argument("--sentences", type=int, default=150)
    args = parser.parse_args()
    run(args.run_dir, args.sentences) if args.mode == "RUN" else parse()


if __name__ == "__main__":
    main()
