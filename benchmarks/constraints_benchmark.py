"""Guided translation on the bundled dev split with a trained run: target prefixes,
constraints, a glossary, and their speed beside the plain search, in one run.

    python benchmarks/run.py guided quality --model-dir runs/sample_en_de

- prefix: the reference's first two words; the share of outputs that start with them (all
  must), BLEU with and without the prefix.
- constraint: per sentence, the first word of the reference (3+ letters) that the plain
  output lacks; the share of constrained outputs holding it as a word (goal >= 98%), BLEU of
  those sentences with and without.
- glossary: 20 source -> target word pairs derived from the training split (the target
  word that co-occurs best with each frequent source word, by Dice coefficient); the share of
  dev sentences whose source holds a term whose output holds its target, before (plain) and
  after (the glossary sent with every request).
- speed: output pieces per second of the plain `Translator` (its `translate_tensors` as one
  graph, as `serving_default`), of the guided search with no guide, with 1 and with 3
  reference words as constraints and with the prefix: --rounds passes of each over the first
  --speed-sentences sentences, alternating searches (medians), in batches of --batch-size
  sentences sorted by length, after one warm-up pass each. The quality figures come from
  one pass over all the sentences.

    python benchmarks/run.py guided prefill --model-dir runs/sample_en_de

- prefill (workload "prefill", only this): the guided search with a prefix of the reference's
  first 2 and first 10 words, its shortest prefix run through the decoder once
  (`decoding.prefill`) or forced a loop step per piece: output pieces/s and ms per sentence
  of each, alternating passes as above (medians), and the share of equal outputs.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import re
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sacrebleu.metrics import BLEU  # noqa: E402

from benchmarks import flags, machine  # noqa: E402
from keras_transformer import SearchOptions  # noqa: E402
from keras_transformer.artifacts import load_trained  # noqa: E402
from keras_transformer.config import DocumentOptions, eval_alpha_for  # noqa: E402
from keras_transformer.data.corpus import sample_path  # noqa: E402
from keras_transformer.decoding import Translator  # noqa: E402
from keras_transformer.decoding.guided import guided_function  # noqa: E402
from keras_transformer.tracing import graph_function

WORD = re.compile(r"\w+")


def parse_args(argv, prog=None):
    parser = flags.parser(prog, __doc__)
    flags.add(parser, model_dir={"required": True}, json=None)
    parser.add_argument("--dataset", default="sample_en_de", help="bundled corpus")
    parser.add_argument("--sentences", type=int, default=0, help="dev sentences (0: all)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per search")
    parser.add_argument("--terms", type=int, default=20, help="glossary pairs")
    parser.add_argument("--speed-sentences", type=int, default=160,
                        help="dev sentences of each timed pass")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3,
                        help="timed passes of each search, alternating (median)")  # fmt: skip
    return parser.parse_args(argv)


def read_pairs(dataset: str, split: str) -> list[tuple[str, str]]:
    with gzip.open(sample_path(dataset, split), "rt", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    return [(r[0], r[1]) for r in rows if len(r) >= 2 and r[0].strip() and r[1].strip()]


def words(text: str) -> list[str]:
    return WORD.findall(text)


def derive_glossary(pairs, count: int) -> list[tuple[str, str]]:
    """`count` (source word, target word) pairs: frequent lower-case source words of 5+
    letters and the target word of 5+ letters with the best Dice coefficient."""
    source_freq, target_freq, joint = collections.Counter(), collections.Counter(), {}
    for source, target in pairs:
        s = {w.lower() for w in words(source) if len(w) >= 5 and w.isalpha()}
        t = {w for w in words(target) if len(w) >= 5 and w.isalpha()}
        source_freq.update(s)
        target_freq.update(t)
        for w in s:
            joint.setdefault(w, collections.Counter()).update(t)
    scored = []
    for w, n in source_freq.most_common(400):
        best, together = joint[w].most_common(1)[0]
        dice = 2 * together / (n + target_freq[best])
        if together >= 10 and best.lower() != w:
            scored.append((dice, w, best))
    scored.sort(reverse=True)
    return [(w, best) for _, w, best in scored[:count]]


def in_batches(texts, batch_size, run):
    """`run(batch texts, index lists)` over length-sorted batches, results in input order;
    returns (outputs, seconds without the first, warm-up batch)."""
    order = np.argsort([len(t) for t in texts], kind="stable")
    batches = [order[i : i + batch_size] for i in range(0, len(texts), batch_size)]
    run(batches[0])  # trace and warm up
    outputs, start = {}, time.perf_counter()
    for batch in batches:
        outputs.update(zip(batch.tolist(), run(batch)))
    return [outputs[i] for i in range(len(texts))], time.perf_counter() - start


def guided_run(function, sources, batch_size, **guides):
    def run(batch):
        fields = [[sources[i] for i in batch]] + [
            [guides.get(key, [""] * len(sources))[i] for i in batch]
            for key in ("prefix", "constraints", "avoid", "glossary")
        ]
        out = function(*[tf.constant(f) for f in fields])
        return [t.decode() for t in out["translations"].numpy()]

    return in_batches(sources, batch_size, run)


def tokens_per_second(tokenizer, outputs, seconds) -> float:
    return float(tokenizer.tokenize(tf.constant(outputs)).row_lengths().numpy().sum() / seconds)


def bleu(outputs, references) -> float:
    return round(BLEU().corpus_score(outputs, [references]).score, 2)


def has_word(text: str, word: str) -> bool:
    return word in words(text)


def main(argv=None, prog=None, workload: str | None = None) -> dict:
    args = parse_args(argv, prog)
    if workload == "prefill":
        return prefill_main(args)
    model, config, tokenizer = load_trained(args.model_dir)
    summary = json.load(open(os.path.join(args.model_dir, "summary.json")))
    search = SearchOptions(alpha=eval_alpha_for(summary.get("model", "")))
    # Sentences cut at max_length as the guided search does (no split of overlong ones).
    translator = Translator(
        model, tokenizer, search, documents=DocumentOptions(overlong="truncate")
    )
    pairs = read_pairs(args.dataset, "dev")
    if args.sentences:
        pairs = pairs[: args.sentences]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    guided = guided_function(translator)
    size = args.batch_size
    plain_function = graph_function(
        translator.translate_tensors, input_signature=[tf.TensorSpec([None], tf.string)]
    )  # one graph, as the export's serving_default

    def plain_run(batch):
        out = plain_function(tf.constant([sources[i] for i in batch]))
        return [t.decode() for t in out["translations"].numpy()]

    plain, _ = in_batches(sources, size, plain_run)
    empty, _ = guided_run(guided, sources, size)
    result = {"sentences": len(sources), "search": search.__dict__}
    result["no guide equals plain"] = sum(a == b for a, b in zip(plain, empty)) / len(plain)
    # Prefix: the reference's first two words.
    prefixes = [" ".join(r.split()[:2]) for r in references]
    prefixed, _ = guided_run(guided, sources, size, prefix=prefixes)
    result["prefix"] = {
        "start with it": sum(o.startswith(p) for o, p in zip(prefixed, prefixes)) / len(sources),
        "bleu without": bleu(plain, references),
        "bleu with": bleu(prefixed, references),
    }
    # Constraints: reference words the plain output lacks.
    missing = [[w for w in words(r) if len(w) >= 3 and not has_word(o, w)]
               for r, o in zip(references, plain)]  # fmt: skip
    chosen = [i for i, m in enumerate(missing) if m]
    one = ["" if not missing[i] else missing[i][0] for i in range(len(sources))]
    constrained, _ = guided_run(guided, sources, size, constraints=one)
    three = ["\t".join(dict.fromkeys(m[:3])) for m in missing]
    three_out, _ = guided_run(guided, sources, size, constraints=three)
    pick = lambda xs: [xs[i] for i in chosen]  # noqa: E731
    result["constraint"] = {
        "sentences": len(chosen),
        "share holding it": sum(has_word(constrained[i], one[i]) for i in chosen) / len(chosen),
        "bleu without": bleu(pick(plain), pick(references)),
        "bleu with": bleu(pick(constrained), pick(references)),
        "3: share holding all": sum(
            all(has_word(three_out[i], w) for w in three[i].split("\t")) for i in chosen
        ) / len(chosen),
    }  # fmt: skip
    guides = {"plain": None, "guided, no guide": {}, "1 constraint": {"constraints": one},
              "3 constraints": {"constraints": three}, "prefix": {"prefix": prefixes}}  # fmt: skip
    result["speed"] = speed_study(plain_run, guided, tokenizer, sources, guides, args)
    result["glossary"] = glossary_study(guided, sources, plain, size, args.dataset, args.terms)
    result["machine"] = machine.description()
    flags.write_json(result, args.json)
    print(json.dumps(result, indent=1))
    return result


def glossary_study(guided, sources, plain, size, dataset, count) -> dict:
    terms = derive_glossary(read_pairs(dataset, "train"), count)
    glossary = "\n".join(f"{s}\t{t}" for s, t in terms)
    out, _ = guided_run(guided, sources, size, glossary=[glossary] * len(sources))

    def applies(source):
        lower = [w.lower() for w in words(source)]
        return [t for s, t in terms if s in lower]

    rows = [(i, applies(s)) for i, s in enumerate(sources) if applies(s)]

    def share(outputs) -> float:
        held = [all(has_word(outputs[i], t) for t in targets) for i, targets in rows]
        return sum(held) / max(len(rows), 1)

    return {"terms": terms, "sentences with a term": len(rows), "before": share(plain),
            "after": share(out)}  # fmt: skip


def speed_study(plain_run, guided, tokenizer, sources, guides, args) -> dict:
    """Median output pieces/s of each search over `args.rounds` alternating passes."""
    count = args.speed_sentences or len(sources)
    subset = sources[:count]
    cut = {name: {k: v[:count] for k, v in (g or {}).items()} for name, g in guides.items()}

    def one_pass(name):
        if cut[name] is None:
            return in_batches(subset, args.batch_size, plain_run)
        return guided_run(guided, subset, args.batch_size, **cut[name])

    rates = {name: [] for name in guides}
    for name in guides:
        one_pass(name)  # warm-up pass
    for _ in range(args.rounds):
        for name in guides:
            outputs, seconds = one_pass(name)
            rates[name].append(tokens_per_second(tokenizer, outputs, seconds))
    return {name: round(float(np.median(r)), 1) for name, r in rates.items()} | {
        "sentences": count, "rounds": args.rounds}  # fmt: skip


def prefill_main(args) -> dict:
    """The "prefill" workload: prefixes of 2 and 10 reference words, prefill on and off."""
    model, _, tokenizer = load_trained(args.model_dir)
    summary = json.load(open(os.path.join(args.model_dir, "summary.json")))
    search = SearchOptions(alpha=eval_alpha_for(summary.get("model", "")))
    translator = Translator(
        model, tokenizer, search, documents=DocumentOptions(overlong="truncate")
    )
    pairs = read_pairs(args.dataset, "dev")[: args.speed_sentences or None]
    sources = [s for s, _ in pairs]
    functions = {on: guided_function(translator, prefill=on) for on in (False, True)}
    runs = {}
    for count in (2, 10):
        prefixes = [" ".join(t.split()[:count]) for _, t in pairs]
        for on in (False, True):
            runs[(count, on)] = (functions[on], prefixes)
    times = {key: [] for key in runs}
    outputs = {}
    for key, (function, prefixes) in runs.items():  # warm-up pass
        outputs[key], _ = guided_run(function, sources, args.batch_size, prefix=prefixes)
    for _ in range(args.rounds):
        for key, (function, prefixes) in runs.items():
            outputs[key], seconds = guided_run(function, sources, args.batch_size, prefix=prefixes)
            times[key].append(seconds)
    result = {"sentences": len(sources), "rounds": args.rounds, "batch size": args.batch_size}
    for (count, on), seconds in times.items():
        median = float(np.median(seconds))
        result[f"prefix {count} words, prefill {'on' if on else 'off'}"] = {
            "output tokens/s": round(tokens_per_second(tokenizer, outputs[(count, on)], median), 1),
            "ms per sentence": round(1000 * median / len(sources), 2),
        }
    for count in (2, 10):
        same = sum(a == b for a, b in zip(outputs[(count, False)], outputs[(count, True)]))
        result[f"prefix {count} words: equal outputs"] = same / len(sources)
    result["machine"] = machine.description()
    flags.write_json(result, args.json)
    print(json.dumps(result, indent=1))
    return result
