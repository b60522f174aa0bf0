"""What a web page sends through `translate_markup`, before and after the parser learned
HTML's line breaks, void elements, comments and character references (2026-11-28).

    git worktree add /tmp/before b65806f
    python benchmarks/results/2026-11-28-web-markup.py RUN            # this checkout
    PYTHONPATH=/tmp/before python benchmarks/results/2026-11-28-web-markup.py RUN

Inputs: consecutive pairs of the bundled dev split (the first `--pairs` sentences), each input
two sentences joined as a web page writes them, `S1<br>S2`, with the first space of S1 written
`&nbsp;` and a comment `<!-- n -->` before S2's last word; its reference is `R1 R2`. Reported:
inputs warned about (translated as text), outputs that hold `<br>` and the comment exactly
once, and BLEU (sacrebleu) of the outputs with tags removed and references decoded, against
the references; beside it the same sentences sent plain (`S1 S2`) through the same
translator. Results: 2026-11-28-web-markup.md.
"""

import argparse
import html
import re

import sacrebleu
import tensorflow as tf

from keras_transformer import SearchOptions, artifacts
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--pairs", type=int, default=300)
    args = parser.parse_args()
    pairs = list(read_pairs("sample_en_de", "dev"))[: args.pairs]
    inputs, plain, refs = [], [], []
    for i in range(0, len(pairs) - 1, 2):
        (s1, r1), (s2, r2) = pairs[i], pairs[i + 1]
        words = s2.split(" ")
        commented = " ".join(words[:-1] + [f"<!-- {i} -->" + words[-1]])
        inputs.append(s1.replace(" ", "&nbsp;", 1) + "<br>" + commented)
        plain.append(f"{s1} {s2}")
        refs.append(f"{r1} {r2}")
    model, _, tokenizer = artifacts.load_trained(args.run)
    translator = Translator(
        model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(args.run))
    )
    markup = tf.function(translator.translate_markup_tensors)
    out, warned = [], 0
    for start in range(0, len(inputs), 32):
        result = markup(tf.constant(inputs[start : start + 32]))
        out += [t.decode() for t in result["translations"].numpy()]
        warned += sum(bool(w) for w in result["warnings"].numpy())
    kept = sum(o.count("<br>") == 1 and len(re.findall(r"<!-- \d+ -->", o)) == 1 for o in out)
    stripped = [html.unescape(re.sub(r"<!--.*?-->|<[^>]+>", " ", o)) for o in out]
    stripped = [" ".join(s.split()) for s in stripped]
    plain_out = translator.translate(plain)[0]
    bleu = sacrebleu.corpus_bleu(stripped, [refs]).score
    plain_bleu = sacrebleu.corpus_bleu(plain_out, [refs]).score
    print(
        f"inputs {len(inputs)}: warned {warned}, <br> and comment kept once {kept}; "
        f"BLEU markup {bleu:.2f}, plain {plain_bleu:.2f}"
    )
    print("example:", inputs[0], "->", out[0])


if __name__ == "__main__":
    main()
