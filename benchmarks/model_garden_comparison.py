"""Our Transformer against TF Model Garden's `Seq2SeqTransformer`, trained side by side.

    pip install -e ".[bench]" && pip install --no-deps tf-models-official==2.20.0
    python benchmarks/run.py learning --steps 300 --eval-every 100 --bleu-pairs 100

Both models get the same sizes (a `TransformerConfig` preset), the same SentencePiece vocabulary
of the bundled corpus, shared embeddings scaled by sqrt(d_model), the same Adam(0.9, 0.98, 1e-9)
with the paper's schedule, the same label-smoothed loss and exactly the same training batches:
the first `--steps` batches of `make_batches`' stream, held in memory and fed to each model in
its own input format (ours: source, BOS + target, labels; Model Garden: source and labels, which
it shifts right itself, starting with id 0). Training alternates chunks of `--eval-every` steps
between the two in one process, so load on a shared machine hits both alike. After each chunk:
teacher-forced dev loss over the whole dev split (token-weighted, the same formula for both) and
BLEU of each library's own cached search with beam 1 on the first `--bleu-pairs` dev pairs.
Writes OUTPUT_DIR/model_garden_comparison.{json,md,png}.
"""

from __future__ import annotations

import json
import os
import platform
import time

from benchmarks import flags, machine
from benchmarks.peers import model_garden


def _train_chunk(model, batches, to_inputs) -> float:
    """One `fit` over `batches` (a list of (source, target, labels) arrays); wall seconds."""
    import tensorflow as tf

    spec = tf.TensorSpec((None, None), tf.int32)
    data = tf.data.Dataset.from_generator(
        lambda: (to_inputs(*b) for b in batches), output_signature=to_inputs(spec, spec, spec)
    )
    started = time.perf_counter()
    model.fit(data, epochs=1, steps_per_epoch=len(batches), shuffle=False, verbose=0)
    return time.perf_counter() - started


def _dev_loss(logits_fn, batches, loss) -> float:
    """Token-weighted mean of the label-smoothed loss over every dev batch."""
    import tensorflow as tf

    total = count = 0.0
    for source, target, labels in batches:
        per_token = loss.call(labels, logits_fn(source, target, labels))  # (batch, tgt_len)
        real = float(tf.reduce_sum(tf.cast(tf.not_equal(labels, 0), tf.float32)))
        total += float(tf.reduce_mean(per_token)) * real  # the mean is the batch's token mean
        count += real
    return total / count


def _bleu(translate, pairs, batch_size=50) -> float:
    from keras_transformer.decoding.evaluation import score_translations

    sources = [s for s, _ in pairs]
    hypotheses = []
    for start in range(0, len(sources), batch_size):
        hypotheses += translate(sources[start : start + batch_size])
    return round(score_translations(hypotheses, [r for _, r in pairs])["bleu"], 2)


def build_systems(config, cfg):
    """(ours compiled as `train_wmt.py` compiles it, Model Garden's compiled the same way)."""
    import tf_keras

    from keras_transformer.model import build_transformer
    from keras_transformer.training.losses import MaskedLabelSmoothedCrossEntropy
    from keras_transformer.training.trainer import compile_model

    ours = build_transformer(config)
    compile_model(ours, config, cfg)
    garden = model_garden.build(config, beam_size=1, extra_decode_length=50, alpha=0.6)
    schedule = model_garden.tf_keras_schedule(
        config.d_model, cfg.recipe.warmup_steps, cfg.recipe.learning_rate_scale
    )
    loss = MaskedLabelSmoothedCrossEntropy(config.label_smoothing, pad_id=config.pad_id)
    garden.compile(
        optimizer=tf_keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=lambda labels, logits: loss.call(labels, logits),  # tf.keras: mean over (b, len)
    )
    return ours, garden, loss


def run(args) -> dict:
    import keras
    import numpy as np
    import tensorflow as tf
    import tf_keras

    from keras_transformer.config import SearchOptions, TrainingConfig
    from keras_transformer.data import corpus
    from keras_transformer.decoding.translator import Translator
    from keras_transformer.training.trainer import prepare_tokenizer, training_datasets

    cfg = TrainingConfig.from_flat(
        model=args.preset, model_dir=args.model_dir, vocab=args.vocab, vocab_size=args.vocab_size,
        batch_tokens=args.batch_tokens, max_length=args.max_length, dropout=0.0,
        warmup_steps=args.warmup_steps, seed=args.seed, train_steps=args.steps,
    )  # fmt: skip
    os.makedirs(cfg.run.model_dir, exist_ok=True)
    keras.utils.set_random_seed(args.seed)  # Python, NumPy, TF and Keras 3's generator
    tf_keras.utils.set_random_seed(args.seed)
    tokenizer = prepare_tokenizer(cfg)
    config = cfg.architecture.model_config(tokenizer.vocab_size)
    train, dev = training_datasets(cfg, tokenizer, num_replicas=1)
    as_numpy = lambda x, y: (x["source"].numpy(), x["target"].numpy(), y.numpy())  # noqa: E731
    train_batches = [as_numpy(x, y) for x, y in train.take(args.steps)]
    dev_batches = [as_numpy(x, y) for x, y in dev]
    pairs = list(corpus.read_split(cfg.data, "dev", limit=args.bleu_pairs))
    print(f"{len(train_batches)} train batches, {len(dev_batches)} dev batches, "
          f"{len(pairs)} BLEU pairs, vocabulary {tokenizer.vocab_size}", flush=True)  # fmt: skip

    ours, garden, loss = build_systems(config, cfg)
    counts = {"ours": ours.count_params(), "model_garden": garden.count_params()}
    print(f"parameters: {counts}", flush=True)
    ours_logits = tf.function(reduce_retracing=True)(
        lambda s, t, y: ours({"source": s, "target": t}, training=False)
    )
    mg_logits = tf.function(reduce_retracing=True)(
        lambda s, t, y: garden({"inputs": s, "targets": y}, training=False)
    )
    translator = Translator(ours, tokenizer, SearchOptions(beam_size=1, alpha=0.6))

    def mg_translate(texts):
        ids = tokenizer.encode_source(tf.constant(texts), cfg.architecture.max_length).to_tensor(0)
        texts = tokenizer.detokenize(garden({"inputs": ids})["outputs"])  # cut at EOS
        return [t.decode() for t in texts.numpy()]

    systems = {
        "ours": (ours, lambda s, t, y: ({"source": s, "target": t}, y), ours_logits,
                 lambda texts: translator.translate(texts, batch_size=50)[0]),
        "model_garden": (garden, lambda s, t, y: ({"inputs": s, "targets": y}, y), mg_logits,
                         mg_translate),
    }  # fmt: skip
    history = {name: [{"step": 0, "seconds": 0.0,
                       "dev_loss": round(_dev_loss(fn, dev_batches, loss), 4), "bleu": None}]
               for name, (_, _, fn, _) in systems.items()}  # fmt: skip
    for start in range(0, args.steps, args.eval_every):
        chunk = train_batches[start : start + args.eval_every]
        for name, (model, to_inputs, logits_fn, translate) in systems.items():
            seconds = history[name][-1]["seconds"] + _train_chunk(model, chunk, to_inputs)
            record = {
                "step": start + len(chunk), "seconds": round(seconds, 1),
                "dev_loss": round(_dev_loss(logits_fn, dev_batches, loss), 4),
                "bleu": _bleu(translate, pairs),
            }  # fmt: skip
            history[name].append(record)
            print(f"{name:12s} {json.dumps(record)}", flush=True)
    return {
        "machine": machine.description(), "python": platform.python_version(),
        "tensorflow": tf.__version__, "tf_keras": tf_keras.__version__,
        "keras": keras.__version__, "date": time.strftime("%Y-%m-%d"),
        "model_garden": __import__("importlib.metadata").metadata.version("tf-models-official"),
        "config": config.to_dict(), "parameters": counts, "args": vars(args),
        "train_tokens_per_step": float(np.mean([(b[2] != 0).sum() for b in train_batches])),
        "history": history,
    }  # fmt: skip


def _cell(value) -> str:
    return "" if value is None else str(value)


def write_results(result: dict, output_dir: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, "model_garden_comparison")
    with open(path + ".json", "w") as f:
        json.dump(result, f, indent=1)
    ours, mg = result["history"]["ours"], result["history"]["model_garden"]
    lines = [
        "Equal steps:", "",
        "| step | seconds ours | seconds MG | dev loss ours | dev loss MG | loss ours/MG "
        "| dev BLEU ours | dev BLEU MG |", "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for a, b in zip(ours, mg):
        lines.append(
            f"| {a['step']} | {a['seconds']} | {b['seconds']} | {a['dev_loss']} | "
            f"{b['dev_loss']} | {a['dev_loss'] / b['dev_loss']:.3f} | {_cell(a['bleu'])} | "
            f"{_cell(b['bleu'])} |"
        )
    lines += ["", "Equal wall time (Model Garden's dev loss interpolated at our evaluation "
              "times; blank past its last evaluation):", "",
              "| seconds | step ours | dev loss ours | step MG | dev loss MG |",
              "|---:|---:|---:|---:|---:|"]  # fmt: skip
    mg_t = [r["seconds"] for r in mg]
    for a in ours[1:]:
        inside = a["seconds"] <= mg_t[-1]
        step = np.interp(a["seconds"], mg_t, [r["step"] for r in mg])
        value = np.interp(a["seconds"], mg_t, [r["dev_loss"] for r in mg])
        lines.append(
            f"| {a['seconds']} | {a['step']} | {a['dev_loss']} | "
            + (f"{step:.0f} | {value:.4f} |" if inside else " | |")
        )
    with open(path + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, label in (("ours", "keras-transformer"), ("model_garden", "Model Garden")):
        rows = result["history"][name]
        for axis, key in zip(axes, ("step", "seconds")):
            axis.plot([r[key] for r in rows], [r["dev_loss"] for r in rows], "o-", label=label)
    for axis, key in zip(axes, ("training step", "training wall seconds")):
        axis.set_xlabel(key)
        axis.set_ylabel("dev loss (label-smoothed)")
        axis.legend()
    figure.suptitle(f"{result['args']['preset']} preset, {result['machine']}")
    figure.tight_layout()
    figure.savefig(path + ".png", dpi=100)


def main(argv=None, prog: str = "python benchmarks/run.py learning") -> None:
    parser = flags.parser(prog, __doc__)
    parser.add_argument("--preset", default="quick", help="TransformerConfig preset (dropout 0)")
    flags.add(parser, steps={"default": 300, "help": "training steps of each model"})
    parser.add_argument("--eval-every", type=int, default=100, help="steps between dev passes")
    parser.add_argument("--bleu-pairs", type=int, default=100, help="dev pairs decoded for BLEU")
    parser.add_argument("--batch-tokens", type=int, default=1536, help="tokens per batch")
    parser.add_argument("--warmup-steps", type=int, default=400, help="of the paper's schedule")
    flags.add(parser, vocab_size={"default": 4000, "help": "SentencePiece pieces"})
    parser.add_argument("--vocab", default=None, help="an existing spm.model to reuse")
    parser.add_argument("--max-length", type=int, default=128, help="longest sentence kept")
    parser.add_argument("--seed", type=int, default=1234, help="data order and weights")
    flags.add(
        parser, model_dir={"default": "runs/model_garden_comparison",
                           "help": "where the vocabulary goes"},
        output_dir=flags.RESULTS_DIR,
    )  # fmt: skip
    args = parser.parse_args(argv)
    result = run(args)
    write_results(result, args.output_dir)
    with open(os.path.join(args.output_dir, "model_garden_comparison.md")) as f:
        print(f.read())
