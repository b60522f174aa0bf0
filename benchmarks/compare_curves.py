"""Dev BLEU against steps and minutes of several training runs on one plot (their
`dev_bleu.json` curves), for example the default command before and after a recipe change:

    python benchmarks/run.py learning curves --run "before=runs/old" --run "after=runs/new" \\
        --output benchmarks/results/learning_curve_quick.png

Minutes count from the start of training (each run's own clock); a star marks each run's best.
"""

from __future__ import annotations

from benchmarks import flags


def main(argv=None, prog: str = "python benchmarks/run.py learning curves") -> None:
    parser = flags.parser(prog, __doc__)
    parser.add_argument(
        "--run", action="append", required=True, metavar="LABEL=MODEL_DIR",
        help="a run's label in the legend and its model directory (repeat for each run)",
    )  # fmt: skip
    parser.add_argument("--output", required=True, help="the PNG to write")
    parser.add_argument("--title", help="the plot's title (default: the module's)")
    args = parser.parse_args(argv)
    from keras_transformer.decoding.dev_evaluation import load_history, plot_learning_curves

    histories = {}
    for run in args.run:
        label, sep, model_dir = run.partition("=")
        if not sep or not model_dir:
            parser.error(f"--run takes LABEL=MODEL_DIR. Received: {run!r}")
        history = load_history(model_dir)
        if not history:
            parser.error(f"{model_dir!r} has no dev-BLEU curve (dev_bleu.json)")
        histories[label] = history
    title = args.title or "Dev BLEU while training (star: each run's best)"
    print(plot_learning_curves(histories, args.output, title))
