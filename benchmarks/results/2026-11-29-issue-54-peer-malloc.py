"""Issue 54, a probe: CTranslate2 float32 on the first 64 test sentences, with glibc's
`malloc` defaults or with the setting our commands use (`keras_transformer.malloc.
keep_freed_memory`: no `mmap`, a large top pad, no trimming); sentences/s, the process's
user and kernel seconds and its minor page faults.

    python export/to_ctranslate2.py --model-dir BASE_RUN --output-dir CT2_DIR
    python benchmarks/results/2026-11-29-issue-54-peer-malloc.py CT2_DIR BATCH THREADS default
    python benchmarks/results/2026-11-29-issue-54-peer-malloc.py CT2_DIR BATCH THREADS keep

BASE_RUN: `keras_transformer.testing.model_dir.make_preset_model_dir(DIR, "base", 32000,
texts)` (random weights: every search runs to its limit). Beam 4, alpha 0.6, at most the
batch's longest source + 51 pieces (the latency workload's CTranslate2 options; base's
limit of 255 positions is never reached), batches of
BATCH, `intra_threads=THREADS`. Results: 2026-11-29-issue-54-peer-malloc.md.
"""

import os
import resource
import sys
import time

from keras_transformer import malloc


def main() -> None:
    path, batch, threads, setting = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if setting == "keep" and not malloc.keep_freed_memory():
        raise SystemExit("glibc's mallopt refused the setting (or this is not glibc)")
    import ctranslate2
    import sentencepiece

    from keras_transformer.data.corpus import read_pairs

    translator = ctranslate2.Translator(path, device="cpu", compute_type="float32",
                                        inter_threads=1, intra_threads=threads)  # fmt: skip
    processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(path, "spm.model"))
    texts = [source for source, _ in read_pairs("sample_en_de", "test")][:64]
    tokens = processor.encode(texts, out_type=str)
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    pieces = 0
    for i in range(0, len(tokens), batch):
        chunk = tokens[i : i + batch]
        results = translator.translate_batch(
            chunk, beam_size=4, length_penalty=0.6, max_batch_size=batch,
            max_decoding_length=max(map(len, chunk)) + 51,
        )  # fmt: skip
        pieces += sum(len(r.hypotheses[0]) for r in results)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    print(f"| {setting} | {batch} | {threads} | {len(texts) / wall:.2f} | {pieces} | "
          f"{after.ru_utime - before.ru_utime:.1f} | {after.ru_stime - before.ru_stime:.1f} | "
          f"{wall:.1f} | {after.ru_minflt - before.ru_minflt} |")  # fmt: skip


if __name__ == "__main__":
    main()
