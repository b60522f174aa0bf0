"""Fail early: a bad model directory, corpus or flag (one that contradicts TF_CONFIG) is refused
before any training, and the training script says so in one `error:` line with exit status 2;
and the cluster helpers of the local multi-worker launcher.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from keras_transformer.config import TrainingConfig
from keras_transformer.testing.runs import run, train_command, write_tsv
from keras_transformer.training import distribute, launch, preflight


def test_unwritable_model_dir_is_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cfg = TrainingConfig.from_flat(model_dir=str(blocker / "run"))
    with pytest.raises(ValueError, match="model_dir is not a writable directory.*file/run"):
        preflight.check_model_dir_writable(cfg.run.model_dir)


def test_model_dir_of_another_config_or_vocabulary_is_refused(tmp_path):
    write_tsv(tmp_path / "pairs.tsv")
    cfg = TrainingConfig.from_flat(
        model="tiny", vocab_size=4000, dataset=f"tsv:{tmp_path / 'pairs.tsv'}",
        model_dir=str(tmp_path / "r"),
    )  # fmt: skip
    os.makedirs(cfg.run.model_dir)
    preflight.save_run_config(cfg)
    from keras_transformer import artifacts

    artifacts.save_config(cfg.run.model_dir, cfg.architecture.model_config(57))
    preflight.check_run(cfg)  # the same run: resumes
    other_model = cfg.replace(d_model=64)
    with pytest.raises(ValueError, match="another config.json.*d_model=128 there, 64 requested"):
        preflight.check_run(other_model)
    other_vocab = cfg.replace(vocab_size=8000)
    with pytest.raises(ValueError, match="another vocabulary: vocab_size=4000 there, vocab_si"):
        preflight.check_run(other_vocab)


WRITTEN_WITH = {
    "replicas": 1, "accumulate_steps": 1, "batch_tokens_per_replica": 256,
    "global_batch_tokens": 256, "precision": "none",
}  # fmt: skip


@pytest.mark.parametrize(
    "changed, message",
    [
        ({"replicas": 2}, "Received: replicas=2, checkpoint's replicas=1"),
        ({"accumulate_steps": 4}, "Received: accumulate_steps=4, checkpoint's accumulate_steps=1"),
        (
            {"precision": "mixed_float16"},
            "Received: precision='mixed_float16', checkpoint's precision='none'",
        ),
    ],
    ids=["replicas", "accumulate_steps", "precision"],
)
def test_resume_with_other_replicas_accumulation_or_precision_is_refused(
    tmp_path, changed, message
):
    """What a checkpoint records of its run (`checkpoints.checkpoint_run`) against this run's:
    another value refuses in one line naming both; the same resumes."""
    import keras

    from keras_transformer.training import checkpoints

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    path = checkpoints.save_checkpoint(model, str(tmp_path), 10, keep=1, run=WRITTEN_WITH)
    recorded = checkpoints.checkpoint_run(path)
    preflight.check_resume(path, recorded, WRITTEN_WITH)
    other = dict(WRITTEN_WITH, global_batch_tokens=1, **changed)
    with pytest.raises(
        ValueError, match=f"^{re.escape(path)} was written with .*{message}$"
    ) as raised:
        preflight.check_resume(path, recorded, other)
    assert "\n" not in str(raised.value)
    older = {k: v for k, v in recorded.items() if k not in changed}  # not recorded: not checked
    preflight.check_resume(path, older, other)


def test_corpus_without_a_usable_pair_is_refused(tmp_path):
    (tmp_path / "bad.tsv").write_text("no tab here\n\nthree\ttabs\there\n")
    dataset, model_dir = f"tsv:{tmp_path / 'bad.tsv'}", str(tmp_path / "r")
    cfg = TrainingConfig.from_flat(dataset=dataset, model_dir=model_dir)
    with pytest.raises(ValueError, match=r"no usable 'source<TAB>target' pair .*skipped_no_tab=2"):
        preflight.check_corpus(cfg)


def test_flags_that_contradict_tf_config_are_refused():
    cluster = json.dumps(
        {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker"}}
    )
    assert distribute.strategy_name("auto", environ={"TF_CONFIG": cluster}) == "multi_worker"
    assert distribute.strategy_name("auto", environ={}) == "auto"
    with pytest.raises(ValueError, match="TF_CONFIG describes a cluster but strategy='mirrored'"):
        distribute.strategy_name("mirrored", environ={"TF_CONFIG": cluster})
    with pytest.raises(ValueError, match="strategy='multi_worker' needs TF_CONFIG"):
        distribute.strategy_name("multi_worker", environ={})
    with pytest.raises(ValueError, match="cpu_replicas=2 needs strategy"):
        distribute.strategy_name("one_device", cpu_replicas=2, environ={})
    with pytest.raises(ValueError, match="skip_nonfinite_batches=-1"):
        TrainingConfig.from_flat(skip_nonfinite_batches=-1)


@pytest.mark.parametrize(
    "strategy, cpu_replicas, num_gpus, refused",
    [
        ("mirrored", 2, 0, True),
        ("multi_worker", 0, 0, True),
        ("auto", 2, 0, True),  # MirroredStrategy over 2 CPU devices
        ("auto", 0, 8, True),  # MirroredStrategy over 8 GPUs
        ("auto", 0, 1, False),  # one GPU: XLA compiles its step
        ("auto", 0, 0, False),
        ("one_device", 0, 4, False),
    ],
)
def test_jit_compile_is_refused_on_several_replicas_naming_both_flags(
    strategy, cpu_replicas, num_gpus, refused
):
    check = distribute.check_jit_compile
    check(strategy, False, cpu_replicas, num_gpus)  # without XLA every strategy runs
    if not refused:
        check(strategy, True, cpu_replicas, num_gpus)
        return
    with pytest.raises(ValueError, match=f"--jit-compile cannot run under --strategy {strategy}"):
        check(strategy, True, cpu_replicas, num_gpus)


def test_preflight_refuses_jit_compile_under_mirrored(tmp_path):
    write_tsv(tmp_path / "pairs.tsv")
    cfg = TrainingConfig.from_flat(
        dataset=f"tsv:{tmp_path / 'pairs.tsv'}", model_dir=str(tmp_path / "r"),
        strategy="mirrored", cpu_replicas=2, jit_compile=True,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"Received: jit_compile=True, strategy='mirrored'$"):
        preflight.check_run(cfg)
    preflight.check_run(cfg.replace(jit_compile=False))


def test_chief_is_the_chief_task_else_worker_0():
    assert distribute.is_chief_task("chief", 0, ["chief", "worker"])
    assert not distribute.is_chief_task("worker", 0, ["chief", "worker"])
    assert distribute.is_chief_task("worker", 0, ["worker"])
    assert not distribute.is_chief_task("worker", 1, ["worker"])
    assert distribute.is_chief_task(None, None, [])


def test_launcher_builds_the_cluster_spec_its_tasks_and_the_command():
    ports = launch.free_ports(3)
    assert len(set(ports)) == 3
    assert launch.cluster_spec(3, ports) == {"worker": [f"127.0.0.1:{p}" for p in ports]}
    with_chief = launch.cluster_spec(3, ports, chief=True)
    assert launch.tasks(with_chief) == [("chief", 0), ("worker", 0), ("worker", 1)]
    assert launch.training_command(["python", "x.py"]) == ["python", "x.py"]
    assert launch.training_command(["--train-steps", "5"])[-2:] == ["--train-steps", "5"]


class _FakeProcess:
    """What `launch` needs of a `subprocess.Popen`: a worker that exits 0 at once."""

    started: list[dict] = []

    def __init__(self, command, env, **kwargs):
        self.started.append(env)
        self.stdout, self.returncode = iter(()), 0

    def poll(self):
        return 0


@pytest.mark.parametrize("workers, chief, per_worker", [(4, False, None), (2, True, 3)])
def test_launcher_gives_each_worker_its_own_gpus(monkeypatch, workers, chief, per_worker):
    """8 mocked GPUs: every task (the chief included) gets its own, none shared."""
    monkeypatch.setattr(launch, "visible_gpus", lambda: [str(i) for i in range(8)])
    monkeypatch.setattr(launch.subprocess, "Popen", _FakeProcess)
    monkeypatch.setattr(_FakeProcess, "started", [])
    assert launch.launch(["true"], workers, chief, gpus=True, gpus_per_worker=per_worker) == 0
    groups = [env["CUDA_VISIBLE_DEVICES"].split(",") for env in _FakeProcess.started]
    share = per_worker or 8 // workers
    assert len(groups) == workers and all(len(group) == share for group in groups)
    assert len({gpu for group in groups for gpu in group}) == workers * share  # disjoint
    tasks = [json.loads(env["TF_CONFIG"])["task"] for env in _FakeProcess.started]
    assert tasks[0]["type"] == ("chief" if chief else "worker")
    monkeypatch.setattr(_FakeProcess, "started", [])
    assert launch.launch(["true"], workers, chief) == 0  # without --gpus: none
    assert {env["CUDA_VISIBLE_DEVICES"] for env in _FakeProcess.started} == {""}


def test_launcher_refuses_gpus_that_do_not_split(monkeypatch, capsys):
    monkeypatch.setattr(launch, "visible_gpus", lambda: ["0", "1", "2"])
    monkeypatch.setattr(launch.subprocess, "Popen", _FakeProcess)
    assert launch.main(["--workers", "2", "--gpus", "--", "true"]) == 2
    assert "Received: gpus=0,1,2, workers=2" in capsys.readouterr().err
    with pytest.raises(ValueError, match="Received: gpus=0,1,2, workers=2, gpus_per_worker=2"):
        launch.split_gpus(["0", "1", "2"], 2, per_task=2)
    assert launch.split_gpus(["0", "1", "2"], 3) == ["0", "1", "2"]


def test_visible_gpus_reads_cuda_visible_devices_else_nvidia_smi():
    assert launch.visible_gpus({"CUDA_VISIBLE_DEVICES": "4,5, 6"}) == ["4", "5", "6"]
    assert launch.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    listing = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-a)\n"
        "  MIG 1g.10gb  Device  0: (UUID: MIG-b)\n"
        "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-c)\n"
    )

    def nvidia_smi(command, **kwargs):
        assert command == ["nvidia-smi", "-L"]
        return subprocess.CompletedProcess(command, 0, stdout=listing)

    def missing(command, **kwargs):
        raise FileNotFoundError(command[0])

    assert launch.visible_gpus({}, run=nvidia_smi) == ["0", "1"]
    assert launch.visible_gpus({}, run=missing) == []


def test_multi_worker_strategy_uses_nccl_when_there_are_gpus(monkeypatch):
    """Mocked GPUs and strategy: the options `make_strategy` passes."""
    import tensorflow as tf

    implementation = tf.distribute.experimental.CommunicationImplementation
    made = []
    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", lambda **kw: made.append(kw))
    for gpus, expected in ((["GPU:0", "GPU:1"], implementation.NCCL), ([], implementation.AUTO)):
        monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind, gpus=gpus: gpus)
        distribute.make_strategy("multi_worker")
        assert made.pop()["communication_options"].implementation == expected


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--dataset", "tsv:{tmp}/bad.tsv"], "error: The training split has no usable"),
        (["--model-dir", "{tmp}/file/run"], "error: model_dir is not a writable directory"),
        pytest.param(
            ["--strategy", "mirrored", "--cpu-replicas", "2", "--jit-compile"],
            "error: --jit-compile cannot run under --strategy mirrored",
            marks=pytest.mark.slow,
        ),
    ],
    ids=["empty_corpus", "unwritable_model_dir", "jit_compile_mirrored"],
)
def test_train_script_prints_one_error_line_with_exit_2(tmp_path, flags, message):
    (tmp_path / "bad.tsv").write_text("no tab here\n")
    (tmp_path / "file").write_text("")
    write_tsv(tmp_path / "pairs.tsv")
    flags = [flag.format(tmp=tmp_path) for flag in flags]
    command = train_command(tmp_path / "pairs.tsv", tmp_path / "run") + flags
    started = time.monotonic()
    result = run(command)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith(message), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 60  # before any training
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_train_script_debug_shows_the_traceback(tmp_path):
    (tmp_path / "bad.tsv").write_text("no tab here\n")
    result = run(train_command(tmp_path / "bad.tsv", tmp_path / "run") + ["--debug"])
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "ValueError: The training split" in result.stderr
