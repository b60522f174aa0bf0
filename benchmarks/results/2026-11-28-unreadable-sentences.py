"""Sentences with nothing the model can read (only characters outside the vocabulary, and
punctuation), before and after `translate_documents` gives them back as they are (2026-11-28).

    git worktree add /tmp/before_unreadable f095c6b
    PYTHONPATH=/tmp/before_unreadable python THIS RUN before   # alternate the two trees,
    python THIS RUN after                                      # several rounds
    (THIS: benchmarks/results/2026-11-28-unreadable-sentences.py; RUN: the default run's dir)

`Translator` (what `serving_default` runs) with the run's evaluation alpha, on
- `INPUTS`: chat-like messages of emoji, and sentences in scripts the bundled vocabulary lacks,
  each alone and after an English sentence: how many come back as sent, empty, or otherwise;
- the bundled test split (1,288 sentences, none unreadable): its translations written to
  PREFIX.test.txt (they must not change) and the seconds of a second pass (the first traces).
"""

import sys
import time
from pathlib import Path

from keras_transformer.data.corpus import read_pairs

EMOJI = ["👍", "🙂", "✅", "🎉🎉", "❤️", "👍🏽", "🇩🇪", "😀 😀 😀", "👉 👈", "🙏!"]
SCRIPTS = ["你好，世界。", "東京タワー", "안녕하세요", "ᚠᚢᚦᚨᚱᚲ", "ሰላም", "नमस्ते दुनिया", "สวัสดี",
           "გამარჯობა", "Բարեւ", "ꦱꦸꦒꦼꦁ"]  # fmt: skip
INPUTS = EMOJI + SCRIPTS + [f"Open the file. {x}" for x in EMOJI + SCRIPTS]


def main(run: str, prefix: str) -> None:
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.decoding import Translator

    model, _, tokenizer = artifacts.load_trained(run)
    translator = Translator(model, tokenizer, SearchOptions(alpha=artifacts.run_eval_alpha(run)))
    outputs = translator(INPUTS)
    alone = len(EMOJI + SCRIPTS)
    for name, rows in (("alone", range(alone)), ("after a sentence", range(alone, len(INPUTS)))):
        same = sum(outputs[i] == INPUTS[i] for i in rows)
        kept = sum(INPUTS[i].split(". ")[-1] in outputs[i] for i in rows)
        empty = sum(outputs[i].strip() == "" for i in rows)
        print(f"{name}: {len(rows)} inputs, {same} back as sent, {kept} holding the unreadable "
              f"part, {empty} empty")  # fmt: skip
    for text, output in zip(INPUTS, outputs):
        print(f"  {text!r} -> {output!r}")
    sources = [s for s, _ in read_pairs("sample_en_de", "test")]
    times = []
    for _ in range(2):
        start = time.perf_counter()
        test, _ = translator.translate(sources)
        times.append(time.perf_counter() - start)
    Path(f"{prefix}.test.txt").write_text("".join(t + "\n" for t in test))
    print(f"test split: {len(sources)} sentences, second pass {times[1]:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
