"""Our Transformer and its peers on exactly the same work, alternating in one run.

    python benchmarks/run.py train --with-peers --json /tmp/train.json
    python benchmarks/run.py decode --with-peers
    python benchmarks/run.py scaling --with-peers --model-dir runs/sample_en_de
    python benchmarks/run.py train --config tiny --vocab-size 200 --batch 4 \\
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
install --no-deps tf-models-official==2.20.0); the others are reported as skipped, and so are
the bfloat16 systems on a CPU without bfloat16 arithmetic (no avx512_bf16 or amx_bf16 flag),
which emulates it (a train run went past 20 minutes) unless --emulated-bfloat16.
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks import flags, machine  # noqa: E402
from benchmarks.peers import DECODE, TRAIN, ours, report, workloads  # noqa: E402
from benchmarks.peers.spec import Spec  # noqa: E402
from keras_transformer import malloc  # noqa: E402

DEFAULTS = {"train": (32, 5), "decode": (32, 1), "scaling": (8, 1)}  # (batch, steps)
DEFAULT_MODEL_DIR = "runs/sample_en_de"
EMULATED = (
    "this CPU has no bfloat16 arithmetic (neither avx512_bf16 nor amx_bf16 in /proc/cpuinfo): "
    "emulated, it kept a train run going past 20 minutes; --emulated-bfloat16 runs it anyway"
)


def parse_args(argv: list[str], prog: str | None = None):
    """The flags of the train, decode and scaling workloads (one set for all three)."""
    parser = flags.parser(prog, __doc__)
    parser.add_argument("--with-peers", action="store_true", help="also every installed peer")
    flags.add(parser, json={"help": "write the results here"},
              config={"default": "base", "choices": ("base", "tiny", "quick")})  # fmt: skip
    parser.add_argument(
        "--norm-position", choices=("pre", "post"),
        help="LayerNorm before or after each sub-layer (default: the preset's; base, tiny: "
        "post as in the paper; quick: pre)",
    )  # fmt: skip
    flags.add(
        parser, vocab_size={"default": 32000, "help": "shared vocabulary"},
        batch={"help": "sentences (default 32; scaling 8)"},
        length={"default": 32, "help": "source, target, output tokens"},
        steps={"help": "train steps (5) or decoded batches (1) each"}, repeats=3,
        model_dir={"help": f"trained run for serving (default {DEFAULT_MODEL_DIR})"},
    )  # fmt: skip
    parser.add_argument(
        "--cpu-isa", choices=sorted(machine.ISA_CAPS), default="native",
        help="instruction set the matrix libraries may use: native (all this CPU has) or "
        "avx2 (oneDNN, MKL and CTranslate2 capped to AVX2/FMA for every system, standing in "
        "for a CPU without AVX-512 or bfloat16 units; the bfloat16 systems are then skipped)",
    )  # fmt: skip
    parser.add_argument(
        "--emulated-bfloat16", action="store_true",
        help="with --with-peers: run the bfloat16 systems also on a CPU that emulates bfloat16",
    )  # fmt: skip
    return parser.parse_args(argv)


def systems(workload: str, with_peers: bool, emulated_ok: bool, cpu_flags=None):
    """(the systems to run, {system: why skipped}): ours alone without `with_peers`; every
    peer of the workload with it, less the bfloat16 ones where this CPU emulates bfloat16
    (`cpu_flags`: the CPU's flags, default this machine's) and not `emulated_ok`."""
    names = list(TRAIN if workload == "train" else DECODE) if with_peers else [ours.NAME]
    if emulated_ok or not machine.emulates_bfloat16(cpu_flags):
        return names, {}
    skipped = {name: EMULATED for name in names if name.endswith("-bfloat16")}
    for name in skipped:
        print(f"skipping {name}: {EMULATED}", flush=True)
    return [name for name in names if name not in skipped], skipped


def main(argv: list[str], prog: str = "python benchmarks/run.py", workload: str = "train"):
    """Run `workload` ("train", "decode" or "scaling") with the flags in `argv`, print its
    table and write its JSON; `prog` (the command up to the flags) is recorded with them."""
    args = parse_args(argv, prog)
    machine.cap_cpu_isa(args.cpu_isa)  # before any matrix library starts
    # One process runs every system, so each gets the setting our commands use
    # (KERAS_TRANSFORMER_MALLOC=default: glibc's own). benchmarks.catalog has applied it
    # already; applying it again only returns whether it holds, for the report.
    kept = malloc.keep_freed_memory()
    batch, steps = DEFAULTS[workload]
    spec = Spec(config=args.config, vocab_size=args.vocab_size, batch=args.batch or batch,
                length=args.length, out_length=args.length, steps=args.steps or steps,
                norm_position=args.norm_position)  # fmt: skip
    names, skipped = systems(workload, args.with_peers, args.emulated_bfloat16)
    if workload == "train":
        result = workloads.train(spec, names, args.repeats)
    elif workload == "decode":
        result = workloads.decode(spec, names, args.repeats)
    else:  # one search per output length, which TensorFlow would report as retracing
        logging.getLogger("tensorflow").setLevel(logging.ERROR)
        model_dir = args.model_dir or (
            DEFAULT_MODEL_DIR if os.path.isdir(DEFAULT_MODEL_DIR) else None
        )
        result = workloads.scaling(spec, names, args.repeats, model_dir)
    result["skipped"] = {**skipped, **result["skipped"]}
    malloc_setting = "freed memory kept (keras_transformer.malloc)" if kept else "default"
    result.update(report.environment(prog, argv, malloc_setting), spec=vars(spec))
    print(report.markdown(result))
    flags.write_json(result, args.json)
