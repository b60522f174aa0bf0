"""Check a SavedModel export against the in-process Translator on a dataset split.

    python export/verify_export.py --model-dir runs/sample_en_de \
        --export-dir runs/sample_en_de/export/transformer/1 --dataset sample_en_de --split test

Both translate the same batches with the same beam settings; it prints the number of
sentences whose translation differs (should be 0) and the largest score difference, and exits
non-zero on any mismatch. Run it before rolling a new version out.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import tensorflow as tf

from keras_transformer import artifacts
from keras_transformer.data import corpus
from keras_transformer.decoding.translator import Translator


def compare(model_dir, export_dir, sources, beam_size=4, alpha=0.6, batch_size=64) -> dict:
    model, config, tokenizer = artifacts.load_trained(model_dir)
    translator = Translator(model, tokenizer, config, beam_size=beam_size, alpha=alpha)
    serving = tf.saved_model.load(export_dir).signatures["serving_default"]
    mismatches, max_score_diff = [], 0.0
    for start in range(0, len(sources), batch_size):
        batch = tf.constant(sources[start : start + batch_size])
        local = translator.translate_tensors(batch)
        served = serving(text=batch)
        same = local["translations"].numpy() == served["translations"].numpy()
        mismatches += [start + i for i in np.flatnonzero(~same)]
        diff = np.abs(local["scores"].numpy() - served["scores"].numpy()).max()
        max_score_diff = max(max_score_diff, float(diff))
    return {"sentences": len(sources), "mismatches": mismatches, "max_score_diff": max_score_diff}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--model-dir", required=True, help="trained model directory")
    parser.add_argument("--export-dir", required=True, help="an exported version directory")
    parser.add_argument("--dataset", default="sample_en_de", help="dataset whose sources to use")
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"), help="split")
    parser.add_argument("--limit", type=int, default=None, help="first N sentences only")
    parser.add_argument("--beam-size", type=int, default=4, help="as exported (default: 4)")
    parser.add_argument("--alpha", type=float, default=0.6, help="as exported (default: 0.6)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per call")
    args = parser.parse_args(argv)
    sources = [s for s, _ in corpus.read_pairs(args.dataset, args.split, limit=args.limit)]
    result = compare(
        args.model_dir, args.export_dir, sources, args.beam_size, args.alpha, args.batch_size
    )
    print(
        f"{result['sentences']} sentences, {len(result['mismatches'])} mismatches "
        f"(first: {result['mismatches'][:10]}), max |score difference| "
        f"{result['max_score_diff']:.2e}"
    )
    return 1 if result["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
