"""The benchmark command (`benchmarks/run.py`, `python -m benchmarks`: `benchmarks.catalog`)
on tiny shapes (ours only), its dispatch to every workload, and the peers' models against
ours: equal parameter counts are an independent check that every system does the same work."""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "benchmarks" / "run.py"
TINY = ["--config", "tiny", "--vocab-size", "200", "--batch", "4", "--length", "8",
        "--steps", "2", "--repeats", "1"]  # fmt: skip
CONFIGS = ("tiny", "quick")  # post-norm and pre-norm


@pytest.fixture(scope="module")
def bench():
    """`benchmarks.catalog`, with the repository root (the `benchmarks` package) importable."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT))
        yield importlib.import_module("benchmarks.catalog")


# The command's earlier form (`--workload X`, quoted in results) and the positional one.
@pytest.mark.parametrize("words", [["--workload", "train"], ["decode"]], ids=" ".join)
def test_runner_reports_tokens_per_second(bench, words, tmp_path, capsys):
    path = tmp_path / "result.json"
    assert bench.main([*words, *TINY, "--json", str(path)], prog="python benchmarks/run.py") == 0
    result = json.loads(path.read_text())
    assert result["workload"] == words[-1]
    assert list(result["tokens_per_s"]) == ["keras-transformer"]  # no --with-peers
    rate = result["tokens_per_s"]["keras-transformer"]
    assert isinstance(rate, float) and math.isfinite(rate) and rate > 0
    assert result["machine"] and result["date"] and result["versions"]["tensorflow"]
    assert result["command"].startswith(" ".join(["python benchmarks/run.py", *words, *TINY]))
    assert "| keras-transformer | 1,414,144 |" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, workload, named, rest",
    [
        (["train", "--steps", "2"], "train", ["train"], ["--steps", "2"]),
        (["--steps", "2", "--workload", "decode"], "decode", ["--workload", "decode"],
         ["--steps", "2"]),
        (["--workload=scaling", "--json", "x"], "scaling", ["--workload=scaling"], ["--json", "x"]),
        (["--steps", "2"], None, [], ["--steps", "2"]),
    ],
)  # fmt: skip
def test_runner_reads_the_workload_positionally_or_as_the_old_flag(
    bench, argv, workload, named, rest
):
    assert bench.split_workload(argv) == (workload, named, rest)


def test_runner_refuses_an_unknown_workload_naming_it(bench, capsys):
    assert bench.main(["nope"]) == 2
    error = capsys.readouterr().err
    assert "workload='nope'" in error and "profile" in error  # the usage lists the workloads


def test_every_workload_kind_names_a_module_with_main(bench):
    for kinds in bench.WORKLOADS.values():
        for kind in kinds.values():
            assert callable(importlib.import_module(f"benchmarks.{kind.module}").main), kind


@pytest.mark.parametrize(
    "argv, prog, flag",
    [
        (["decode", "sweep", "--help"], "python -m benchmarks decode sweep", "--batch-sizes"),
        (["serving", "--help"], "python -m benchmarks serving", "--compare-export"),
    ],
)  # fmt: skip
def test_runner_passes_a_kind_its_flags(bench, argv, prog, flag, capsys):
    """A workload's second word picks the kind (or the first kind is the default); the rest
    are that kind's flags, parsed by its own parser under the command's words."""
    with pytest.raises(SystemExit) as stop:
        bench.main(argv, prog="python -m benchmarks")
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {prog} ") and flag in out


def test_bfloat16_systems_are_skipped_with_why_where_the_cpu_emulates_bfloat16(bench):
    from benchmarks import side_by_side

    names, skipped = side_by_side.systems("train", True, False, cpu_flags={"avx2", "fma"})
    assert names == ["keras-transformer", "tf-model-garden", "pytorch"]
    assert sorted(skipped) == [
        "keras-transformer-bfloat16", "pytorch-bfloat16", "tf-model-garden-bfloat16"
    ]  # fmt: skip
    assert all("avx512_bf16" in why and "--emulated-bfloat16" in why for why in skipped.values())
    names, skipped = side_by_side.systems("decode", True, False, cpu_flags={"avx2"})
    assert "keras-transformer-bfloat16" not in names and list(skipped) == [
        "keras-transformer-bfloat16"
    ]  # fmt: skip
    for flags, emulated_ok in (({"amx_bf16"}, False), ({"avx512_bf16"}, False), (set(), True)):
        names, skipped = side_by_side.systems("train", True, emulated_ok, cpu_flags=flags)
        assert len(names) == 6 and skipped == {}
    assert side_by_side.systems("train", False, False, cpu_flags=set()) == (
        ["keras-transformer"], {}
    )  # fmt: skip


@pytest.fixture(scope="module")
def our_counts(bench) -> dict[str, int]:
    """Parameters of our model of the test sizes, by config (post-norm tiny, pre-norm quick)."""
    from keras_transformer.model import build_transformer

    return {c: build_transformer(_spec(c).model_config()).count_params() for c in CONFIGS}


def _spec(config: str):
    from benchmarks.peers.spec import Spec  # importable under the `bench` fixture

    return Spec(config=config, vocab_size=200, length=8)


@pytest.mark.parametrize("config", CONFIGS)
def test_pytorch_peer_has_our_parameter_count(bench, our_counts, config):
    pytest.importorskip("torch")
    from benchmarks.peers import pytorch_nmt

    assert pytorch_nmt.count_params(_spec(config).model_config()) == our_counts[config]


@pytest.mark.parametrize("config", CONFIGS)
def test_model_garden_peer_has_our_parameter_count(bench, our_counts, config):
    pytest.importorskip("tf_keras")
    pytest.importorskip("official.nlp.modeling.models")
    from benchmarks.peers import model_garden

    model_config = _spec(config).model_config()
    # Model Garden ends each stack with a LayerNorm (gamma, beta) even after post-norm layers
    extra = 0 if model_config.norm_position == "pre" else 2 * 2 * model_config.d_model
    assert model_garden.build(model_config).count_params() == our_counts[config] + extra


def test_ctranslate2_peer_decodes_exactly_the_forced_length(bench):
    pytest.importorskip("ctranslate2")
    from benchmarks.peers import ctranslate2_peer, ours
    from benchmarks.peers.spec import Spec

    if ctranslate2_peer.missing():
        pytest.skip(ctranslate2_peer.missing())
    spec = Spec(config="tiny", vocab_size=200, batch=3, length=8, out_length=11)
    model = ours.build_model(spec)
    for kind in ctranslate2_peer.COMPUTE_TYPES:
        run, parameters = ctranslate2_peer.make_decode(spec, model, kind)
        assert run().tolist() == [11, 11, 11] and parameters == model.count_params()


def test_ctranslate2_peer_decodes_in_a_process_of_its_own_as_in_process(bench, tmp_path):
    """Each compute type in its own worker process (two translators in one process slow each
    other down): the same output lengths as a `ctranslate2.Translator` here, from a live
    process that is not this one."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    from benchmarks.ctranslate2_process import Worker
    from benchmarks.peers import ctranslate2_peer, ours
    from benchmarks.peers.spec import Spec, decode_sources
    from keras_transformer.serving.ctranslate2_export import export_ctranslate2

    if ctranslate2_peer.missing():
        pytest.skip(ctranslate2_peer.missing())
    spec = Spec(config="tiny", vocab_size=200, batch=3, length=8, out_length=11)
    model = ours.build_model(spec)
    worker = ctranslate2_peer.load(model, "float32")
    assert isinstance(worker, Worker) and worker._process.is_alive()
    assert worker._process.pid != os.getpid()
    tokens = ctranslate2_peer.vocabulary(spec.vocab_size)
    source = [[tokens[i] for i in row[:-1]] for row in decode_sources(spec)]
    options = dict(beam_size=2, max_decoding_length=6)  # EOS may end a search early
    path = export_ctranslate2(model, str(tmp_path / "ct2"), tokens)
    here = ctranslate2.Translator(path, device="cpu").translate_batch(source, **options)
    timed = worker.translate_tokens(source, **options)
    assert timed.outputs == [len(r.hypotheses[0]) for r in here] and timed.seconds > 0
    worker.close()
    assert not worker._process.is_alive()


def test_our_bfloat16_decode_keeps_the_float32_model_and_the_forced_length(bench):
    from benchmarks.peers import ours
    from benchmarks.peers.spec import Spec

    spec = Spec(config="tiny", vocab_size=200, batch=3, length=8, out_length=11)
    model = ours.build_model(spec)
    run, parameters = ours.make_decode_bfloat16(spec, model)
    assert run().tolist() == [11, 11, 11] and parameters == model.count_params()
    assert {str(w.dtype) for w in model.weights} == {"float32"}  # the float32 model untouched


def test_our_bfloat16_training_leaves_the_global_policy_and_trains(bench):
    import keras

    from benchmarks.peers import ours

    spec = _spec("quick").replace(batch=4, steps=1)
    run, parameters = ours.make_train(spec, dtype="mixed_bfloat16")
    assert keras.config.dtype_policy().name == "float32"  # the global policy untouched
    run(2)  # the layers keep their own policy
    _, float32_parameters = ours.make_train(spec)
    assert parameters == float32_parameters


def test_pytorch_bfloat16_peer_trains_with_our_parameter_count(bench, our_counts):
    pytest.importorskip("torch")
    from benchmarks.peers import pytorch_nmt

    run, parameters = pytorch_nmt.make_train(_spec("quick").replace(batch=4), bfloat16=True)
    run(2)
    assert parameters == our_counts["quick"]


@pytest.mark.slow  # builds and trains Model Garden's model: about 46 s on a 2-core CPU
def test_model_garden_bfloat16_peer_computes_in_bfloat16_and_leaves_the_policy(bench):
    pytest.importorskip("tf_keras")
    pytest.importorskip("official.nlp.modeling.models")
    import tf_keras

    from benchmarks.peers import model_garden

    spec = _spec("quick").replace(batch=4)
    config = spec.model_config()
    garden = model_garden._build_under_policy(config, "mixed_bfloat16")
    assert tf_keras.mixed_precision.global_policy().name == "float32"  # restored
    assert {v.dtype.name for v in garden.trainable_variables} == {"float32"}
    # the stacks and the embedding compute in bfloat16 (its sinusoids stay float32, by design)
    stacks = (garden.encoder_layer, garden.decoder_layer, garden.embedding_lookup)
    assert {layer.compute_dtype for layer in stacks} == {"bfloat16"}
    run, parameters = model_garden.make_train(spec, dtype="mixed_bfloat16")
    run(2)
    assert parameters == garden.count_params()


def test_a_system_that_cannot_run_the_workload_is_skipped_with_why(bench):
    pytest.importorskip("tf_keras")
    pytest.importorskip("official.nlp.modeling.models")
    from benchmarks.peers import model_garden, workloads

    skipped = {}
    spec = _spec("tiny")  # post-norm, as the paper
    built = workloads.build(
        {"mg-bf16": lambda: model_garden.make_train(spec, dtype="mixed_bfloat16")}, skipped
    )
    assert built == {} and "--norm-position pre" in skipped["mg-bf16"]


def test_norm_position_overrides_the_preset_for_every_system(bench):
    from benchmarks.peers.spec import Spec

    assert Spec(config="base").model_config().norm_position == "post"
    assert Spec(config="base", norm_position="pre").model_config().norm_position == "pre"
    assert Spec(config="quick").model_config().norm_position == "pre"


NO_TENSORFLOW = """import importlib.abc, sys
class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text", "tf_keras"):
            raise ImportError(f"{name} is hidden: the GPU machines have no TensorFlow")
sys.meta_path.insert(0, _NoTensorFlow())
"""


def _run_under_jax_without_tensorflow(words: list[str], args: list[str], tmp_path) -> dict:
    """`python benchmarks/run.py WORDS ARGS` in a child process as on the GPU machines (Keras on
    JAX, here on the CPU, TensorFlow hidden): its last line of output, parsed as JSON."""
    from keras_transformer.testing.backends import BACKEND_ENV, require

    require("jax")
    (tmp_path / "sitecustomize.py").write_text(NO_TENSORFLOW)
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "KERAS_BACKEND": "jax", **BACKEND_ENV["jax"], "PYTHONPATH": path}
    child = subprocess.run(
        [sys.executable, str(RUNNER), *words, *args],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-4000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a JAX child process: about 40 s of CPU for a benchmark script
def test_train_benchmark_runs_jitted_under_jax_without_tensorflow(our_counts, tmp_path):
    """The GPU command (`KERAS_BACKEND=jax python benchmarks/run.py train fit ...`) on a
    machine without TensorFlow: it must run and compile the step with jax.jit by default (a
    bare compile(jit_compile=False) ran it op by op, 23x slower on the tiny preset)."""
    args = ["--config", "tiny", "--vocab-size", "200", "--batch-tokens", "64", "--length", "8",
            "--steps", "1", "--warmup", "1", "--peak-tflops", "1"]  # fmt: skip
    result = _run_under_jax_without_tensorflow(["train", "fit"], args, tmp_path)
    assert result["backend"] == "jax" and result["jit_compile"] is True
    assert result["accelerator"] == "none"  # JAX_PLATFORMS=cpu
    assert result["parameters"] == our_counts["tiny"]  # the same sizes (vocabulary 200)
    assert result["target_tokens_per_sec"] > 0 and "mfu" in result


@pytest.mark.slow  # a JAX child process, four parts compiled: about 40 s of CPU
@pytest.mark.parametrize("attention", ["ours", "fused"])
def test_jax_step_profile_times_every_part_without_tensorflow(attention, tmp_path):
    """`benchmarks/run.py profile jax`, the GPU profile, on the tiny preset: every part
    timed, and the parts nested (the backward pass contains the forward pass)."""
    args = ["--config", "tiny", "--vocab-size", "200", "--batch", "4", "--length", "8",
            "--steps", "1", "--repeats", "1", "--attention", attention]  # fmt: skip
    result = _run_under_jax_without_tensorflow(["profile", "jax"], args, tmp_path)
    assert result["backend"] == "jax" and result["attention"] == attention
    ms = result["ms"]
    assert list(ms) == ["forward", "+ loss", "+ backward", "fit step"]
    assert all(value > 0 for value in ms.values())
    assert ms["+ backward"] > ms["forward"] and result["share_of_fit_step"]["fit step"] == 1.0


def _train_benchmark():
    return importlib.import_module("benchmarks.train_benchmark")  # under the `bench` fixture


@pytest.mark.parametrize("dropout", [None, "0.1"])
def test_train_benchmark_compares_with_pytorch_only_without_dropout(bench, dropout, capsys):
    """The PyTorch peer has no dropout: --pytorch with the preset's or any other P_drop is an
    error that names the value given, before anything runs."""
    args = ["--config", "tiny", "--pytorch"] + ([] if dropout is None else ["--dropout", dropout])
    with pytest.raises(SystemExit) as stop:
        _train_benchmark().main(args)
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert "pass --dropout 0" in error and f"given: {dropout or 'none'}" in error


def test_train_benchmark_times_pytorch_on_the_same_sizes(bench, our_counts):
    """--pytorch times PyTorch's nn.Transformer on the benchmark's batch shape (CPU here)."""
    pytest.importorskip("torch")
    module = _train_benchmark()
    args = ["--config", "tiny", "--vocab-size", "200", "--batch-tokens", "64", "--length", "8",
            "--steps", "1", "--warmup", "1", "--dropout", "0", "--pytorch",
            "--peak-tflops", "1"]  # fmt: skip
    result = module.run_pytorch(module.parse_args(args))
    assert result["device"] == "cpu" and result["batch"] == [8, 8]
    assert result["parameters"] == our_counts["tiny"]  # the same sizes (vocabulary 200)
    assert result["target_tokens_per_sec"] > 0 and result["mfu"] > 0


def test_serving_benchmark_documents_send_the_same_lines_both_ways(bench):
    serving = importlib.import_module("benchmarks.serving_benchmark")
    sentences = [f"Line {i}." for i in range(40)]
    calls = []
    rows = serving.documents_vs_sentences(calls.append, sentences, per_request=3, rounds=2)
    # Warm-up plus two rounds: each line three times as a document's part, three times alone.
    documents = [text for texts in calls for text in texts if text.count("Line") > 1]
    singles = [text for texts in calls for text in texts if text.count("Line") == 1]
    assert " ".join(documents) == " ".join(sentences * 3)
    assert all(2 <= d.count("Line") <= 12 for d in documents[: len(documents) // 3 - 1])
    assert singles == sentences * 3
    assert [(r["round"], r["path"]) for r in rows] == [
        (0, "documents"), (0, "sentences"), (1, "sentences"), (1, "documents")
    ]  # fmt: skip
    assert all(r["sentences"] == 40 and r["sentences_per_s"] > 0 for r in rows)


def test_preset_model_dir_has_the_preset_and_a_vocabulary_of_the_texts(tmp_path):
    import sentencepiece

    from keras_transformer import TransformerConfig, artifacts
    from keras_transformer.testing.model_dir import SENTENCES, make_preset_model_dir

    directory = make_preset_model_dir(str(tmp_path / "m"), "tiny", 48, SENTENCES, seed=1)
    assert artifacts.load_config(directory) == TransformerConfig.tiny(48)
    spm = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(directory, artifacts.TOKENIZER_FILE)
    )
    assert spm.vocab_size() == 48
    assert os.path.getsize(os.path.join(directory, artifacts.FINAL_WEIGHTS)) > 0
