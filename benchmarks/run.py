"""Our Transformer and its peers on exactly the same work, alternating in one run.

    python benchmarks/run.py --workload train --with-peers --json /tmp/train.json
    python benchmarks/run.py --workload decode --with-peers
    python benchmarks/run.py --workload scaling --with-peers --model-dir runs/sample_en_de
    python benchmarks/run.py --workload train --config tiny --vocab-size 200 --batch 4 \\
        --length 8 --steps 2 --repeats 1          # seconds: what the test runs

train: target tokens/s of full steps (forward, label-smoothed loss, backward, Adam update
with the paper's schedule) of ours, TF Model Garden's Seq2SeqTransformer and PyTorch's
nn.Transformer, and of ours and Model Garden ("mixed_bfloat16") and PyTorch (bfloat16
autocast) in bfloat16 with --with-peers (--norm-position pre for Model Garden's: its post-norm
decoder fails in bfloat16). decode: output tokens/s (sources x steps / s) of beam search with
exactly --length output tokens (EOS suppressed): ours, Model Garden, CTranslate2 (float32 and int8,
our same random model converted). scaling: ours and CTranslate2 at forced output lengths
16-256 (cost per token relative to 16), and our exported serving signature at batch 8 vs 64
on a trained --model-dir. Peers run where installed (pip install -e ".[bench]" and pip
install --no-deps tf-models-official==2.20.0); the others are reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from peers import DECODE, TRAIN, ours, report, workloads  # noqa: E402  (beside this script)
from peers.spec import Spec  # noqa: E402

from keras_transformer import malloc  # noqa: E402

DEFAULTS = {"train": (32, 5), "decode": (32, 1), "scaling": (8, 1)}  # (batch, steps)
DEFAULT_MODEL_DIR = "runs/sample_en_de"


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", required=True, choices=tuple(DEFAULTS))
    parser.add_argument("--with-peers", action="store_true", help="also every installed peer")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--config", default="base", choices=("base", "tiny", "quick"))
    parser.add_argument(
        "--norm-position", choices=("pre", "post"),
        help="LayerNorm before or after each sub-layer (default: the preset's; base, tiny: "
        "post as in the paper; quick: pre)",
    )  # fmt: skip
    parser.add_argument("--vocab-size", type=int, default=32000, help="shared vocabulary")
    parser.add_argument("--batch", type=int, help="sentences (default 32; scaling 8)")
    parser.add_argument("--length", type=int, default=32, help="source, target, output tokens")
    parser.add_argument("--steps", type=int, help="train steps (5) or decoded batches (1) each")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (median)")
    parser.add_argument(
        "--model-dir", help=f"trained run for serving (default {DEFAULT_MODEL_DIR})"
    )
    return parser.parse_args(argv)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    # One process runs every system, so each gets the setting our commands use
    # (KERAS_TRANSFORMER_MALLOC=default: glibc's own).
    kept = malloc.keep_freed_memory()
    batch, steps = DEFAULTS[args.workload]
    spec = Spec(config=args.config, vocab_size=args.vocab_size, batch=args.batch or batch,
                length=args.length, out_length=args.length, steps=args.steps or steps,
                norm_position=args.norm_position)  # fmt: skip
    names = list(TRAIN if args.workload == "train" else DECODE)
    names = names if args.with_peers else [ours.NAME]
    if args.workload == "train":
        result = workloads.train(spec, names, args.repeats)
    elif args.workload == "decode":
        result = workloads.decode(spec, names, args.repeats)
    else:  # one search per output length, which TensorFlow would report as retracing
        logging.getLogger("tensorflow").setLevel(logging.ERROR)
        model_dir = args.model_dir or (
            DEFAULT_MODEL_DIR if os.path.isdir(DEFAULT_MODEL_DIR) else None
        )
        result = workloads.scaling(spec, names, args.repeats, model_dir)
    malloc_setting = "freed memory kept (keras_transformer.malloc)" if kept else "default"
    result.update(report.environment(argv, malloc_setting), spec=vars(spec))
    print(report.markdown(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
