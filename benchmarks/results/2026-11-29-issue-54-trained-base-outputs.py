"""Issue 54: the trained base model's one-sentence requests, ours against CTranslate2's outputs.

    PYTHONPATH=. python benchmarks/results/2026-11-29-issue-54-trained-base-outputs.py

The 6 single sentences of ~5, ~20 and ~50 pieces of `serving single --per-length 6` with
the model of 2026-11-29-issue-54-trained-base.md (its directory in RUN below): our XLA
translator (beam 4, alpha 0.6, the next-step stop) and CTranslate2 float32 with the latency
workload's options; each line: target length, source pieces, output pieces of each, same or
not. A one-off check kept as the command behind that file; not a workload."""

import os
import tempfile

import tensorflow as tf

from benchmarks.ctranslate2_process import _translate_texts
from benchmarks.latency_benchmark import one_sentence_lines, pick_sentences
from keras_transformer import SearchOptions, artifacts
from keras_transformer.data.corpus import read_pairs
from keras_transformer.decoding import Translator
from keras_transformer.serving.ctranslate2_export import export_ctranslate2, sentencepiece_pieces


def main():
    run = os.environ.get("RUN", "/tmp/s77/base_trained")
    model, config, tok = artifacts.load_trained(run)
    texts = [s for s, _ in read_pairs("sample_en_de", "test")]
    texts = one_sentence_lines(texts)

    def count(t):
        return int(tok.tokenize(tf.constant([t])).row_lengths()[0])

    import ctranslate2
    import sentencepiece

    spm = artifacts.path(run, artifacts.TOKENIZER_FILE)
    path = export_ctranslate2(
        model, os.path.join(tempfile.mkdtemp(), "m"), sentencepiece_pieces(spm)
    )
    tr2 = ctranslate2.Translator(path, device="cpu", compute_type="float32")
    proc = sentencepiece.SentencePieceProcessor(model_file=spm)
    opts = SearchOptions(alpha=0.6, stop_lookahead="next", padded_decode=True)
    ours = Translator(model, tok, opts, jit_compile=True)
    search = dict(beam_size=4, alpha=0.6, max_extra_length=50, limit=config.max_length - 1)
    for n in (5, 20, 50):
        for t in pick_sentences(texts, count, n, 6, join=False):
            a = ours([t])[0]
            b = _translate_texts(tr2, proc, [t], search)[0]
            a = a.decode() if isinstance(a, bytes) else a
            print(
                n,
                count(t),
                "ours",
                count(a),
                "ct2",
                count(b),
                "same" if a == b else "DIFF",
                flush=True,
            )


if __name__ == "__main__":
    main()
