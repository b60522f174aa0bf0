"""Train a Transformer translator (`keras-transformer-train --help`, or
`python pipelines/train_wmt.py --help`).

Defaults (`--recipe cpu_quick`) train the `quick` preset on the bundled English-German corpus
(about ten minutes on a 2-core CPU), report BLEU on its test split and export a SavedModel for
TF Serving. The paper's recipes on WMT14, shaped for this machine's GPUs (25000 tokens an
update, checkpoints every 10 minutes, dev BLEU under 2% of the run, precision by GPU):
`--recipe paper_base_en_de` (also paper_big_en_de, paper_base_en_fr, paper_big_en_fr); a flag
given wins over the recipe's value. `--print-config` prints the resolved config and exits;
with `--mock-devices 8xA100` (or 1xV100, cpu, 2x8xH100) for another machine.
Run the same command again after an interruption: it resumes from the latest checkpoint.
Several machines: TF_CONFIG per process (see BUILD.md), or on one machine
`python -m keras_transformer.training.launch --workers 2 -- <these flags>`.
Exit codes: 2 bad flags or model directory (one `error:` line; --debug shows the traceback),
3 non-finite loss (nothing saved from it; rerunning resumes from the last good checkpoint),
4 another worker of a cluster stopped (restart all workers: they resume together),
143 stopped by SIGTERM or SIGINT (any worker's, under several) after writing a checkpoint at
the update it finished: rerun the same command to resume (--preemption-grace-seconds).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from keras_transformer import recipes
from keras_transformer.cli import common
from keras_transformer.config import TrainingConfig

# --SPLIT-source/--SPLIT-target F: `text:SOURCE,TARGET` as the value of this field.
FILE_PAIR_FIELDS = {"train": "dataset", "dev": "dev_dataset", "test": "test_dataset"}


def build_parser() -> argparse.ArgumentParser:
    """One flag per `TrainingConfig` field (`common.add_config_arguments`), `--export-dir`,
    the `--SPLIT-source/--SPLIT-target` pairs and `--debug`."""
    parser = common.make_parser(__doc__)
    groups = common.add_config_arguments(parser, TrainingConfig)
    groups["run"].add_argument(
        "--export-dir",
        default=None,
        help="SavedModel export base (default: MODEL_DIR/export; 'none' to skip)",
    )
    _add_file_pair_flags(parser)
    groups["recipe"].add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config (devices, checkpoints, dev-BLEU cadence, precision, "
        "batch, then every field) and exit without training",
    )
    groups["recipe"].add_argument(
        "--mock-devices",
        default=None,
        help="with --print-config: resolve for this machine instead of the one here: cpu, "
        f"GPUSxKIND or WORKERSxGPUSxKIND, KIND one of {', '.join(recipes.GPU_KINDS)} "
        "(e.g. 8xA100, 1xV100, 2x8xH100)",
    )
    return parser


def _add_file_pair_flags(parser: argparse.ArgumentParser) -> None:
    """`--train-source F --train-target F` = `--dataset text:F,F`; dev and test alike."""
    group = parser.add_argument_group("corpora as two files (source, target: one sentence a line)")
    for split, field in FILE_PAIR_FIELDS.items():
        flag = "--" + field.replace("_", "-")
        for side in ("source", "target"):
            group.add_argument(
                f"--{split}-{side}",
                default=None,
                help=f"{split} {side} sentences, one a line, plain or .gz; --{split}-source "
                f"S --{split}-target T is {flag} text:S,T",
            )


def _file_pair_datasets(args: argparse.Namespace) -> dict[str, str]:
    """`{field: "text:SOURCE,TARGET"}` of the `--SPLIT-source/--SPLIT-target` flags given."""
    from keras_transformer.data.corpus_files import text_dataset

    datasets = {}
    for split, field in FILE_PAIR_FIELDS.items():
        source, target = getattr(args, f"{split}_source"), getattr(args, f"{split}_target")
        if (source is None) != (target is None):
            raise ValueError(
                f"--{split}-source and --{split}-target go together. "
                f"Received: --{split}-source={source!r}, --{split}-target={target!r}"
            )
        if source is not None:
            datasets[field] = text_dataset(source, target)
    return datasets


def training_config(args: argparse.Namespace) -> TrainingConfig:
    """The `TrainingConfig` of parsed flags: the recipe's values for the devices, the flags
    given winning (a bad value or combination raises a ValueError naming it)."""
    given = {**common.given_values(args, TrainingConfig), **_file_pair_datasets(args)}
    name = given.pop("recipe_name", recipes.DEFAULT_RECIPE)
    return recipes.resolve(name, devices(args, name), **given)


def devices(args: argparse.Namespace, recipe: str) -> recipes.Devices:
    """The machine the recipe is resolved for: `--mock-devices`, else this one (its GPUs and
    TF_CONFIG's workers) for a recipe that uses them."""
    mock = getattr(args, "mock_devices", None)
    if mock is not None:
        if not getattr(args, "print_config", False):
            raise ValueError(
                "--mock-devices describes another machine: use it with --print-config. "
                f"Received: --mock-devices={mock}"
            )
        return recipes.Devices.parse(mock)
    return local_devices() if recipes.get(recipe).uses_devices else recipes.Devices.cpu()


def local_devices() -> recipes.Devices:
    """This machine's GPUs (their kind from the first one's name and compute capability)
    and the workers of TF_CONFIG's cluster."""
    import tensorflow as tf

    from keras_transformer.training.distribute import read_tf_config

    cluster = (read_tf_config() or {}).get("cluster", {})
    workers = max(1, len(cluster.get("chief", [])) + len(cluster.get("worker", [])))
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return recipes.Devices.cpu(workers)
    details = tf.config.experimental.get_device_details(gpus[0])
    name = details.get("device_name", "GPU")
    known = [kind for key, kind in recipes.GPU_KINDS.items() if key in name]
    capability = tuple(details.get("compute_capability", (0, 0)))
    kind = known[0] if known else recipes.GpuKind(name, capability, 16.0, None)
    return recipes.Devices(len(gpus), kind, workers)


def train(args: argparse.Namespace) -> int:
    """Train (or resume), evaluate on the test split and export, as the flags say
    (`keras_transformer.runner.Runner`); with `--print-config` only print the resolved
    config."""
    from keras_transformer.runner import Runner, resolve_config

    cfg = training_config(args)
    recipe = recipes.get(cfg.recipe.recipe_name)
    machine = devices(args, recipe.name)
    if args.print_config:
        cfg = resolve_config(cfg)
        for line in recipes.device_lines(cfg, machine) + recipes.config_lines(cfg):
            print(line)
        return 0
    shown = machine if recipe.uses_devices else None  # cpu_quick looks at no device
    runner = Runner(cfg, export_dir=args.export_dir, devices=shown)
    for line in runner.report(runner.run()):
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(build_parser(), train, argv)


if __name__ == "__main__":
    sys.exit(main())
