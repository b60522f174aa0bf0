"""Preemption: SIGTERM or SIGINT makes a run finish its update, write a checkpoint at that
step and exit with status 143 within the grace period; the rerun ends where an
uninterrupted run ends. The fast tests drive `SignalWatch` through `RunControl` inside one
`fit`; the slow ones
send SIGTERM to `pipelines/train_wmt.py` (one process, and one of two workers)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import keras
import numpy as np
import pytest

from keras_transformer import artifacts
from keras_transformer.config import TrainingConfig
from keras_transformer.testing.runs import (
    max_abs_difference,
    run,
    sigterm_after_step,
    train_command,
    write_tsv,
)
from keras_transformer.training import checkpoints
from keras_transformer.training.callbacks import PeriodicCheckpoint
from keras_transformer.training.errors import PREEMPTED_STATUS, PreemptedError
from keras_transformer.training.optimizer import GuardedAccumulatingAdam
from keras_transformer.training.preemption import SignalWatch
from keras_transformer.training.run_control import RunControl
from keras_transformer.training.run_end import RunEnd

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _model(accumulate: int) -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(GuardedAccumulatingAdam(0.01, accumulate_steps=accumulate), "mse")
    return model


class _SendAt(keras.callbacks.Callback):
    """Sends `signum` to this process as micro-batch `batch` begins (counted over epochs)."""

    def __init__(self, signum: int, batch: int):
        super().__init__()
        self.signum, self.at, self.seen = signum, batch, 0

    def on_train_batch_begin(self, batch, logs=None):
        if self.seen == self.at:
            os.kill(os.getpid(), self.signum)
        self.seen += 1


@pytest.mark.parametrize(
    "signum, accumulate, sent_at, stops_after",
    [
        (signal.SIGTERM, 1, 6, 7),  # micro-batch 6 is update 7
        (signal.SIGINT, 1, 0, 1),
        (signal.SIGTERM, 2, 6, 4),  # micro-batch 6 begins update 4: finish it (6 and 7)
        (signal.SIGTERM, 3, 7, 3),  # micro-batch 7 ends update 3 (6, 7, 8)
    ],
    ids=["sigterm", "sigint_first_batch", "accumulate_2", "accumulate_3"],
)
def test_signal_finishes_the_update_writes_its_checkpoint_and_stops(
    tmp_path, signum, accumulate, sent_at, stops_after
):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(96, 3)).astype("float32"), rng.normal(size=(96, 1)).astype("float32")
    model = _model(accumulate)
    checkpoint = PeriodicCheckpoint(str(tmp_path), every_steps=100, every_minutes=60, keep=3)
    watch = SignalWatch(grace_seconds=60)
    control = RunControl(RunEnd(1000), checkpoint, watch)
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with pytest.raises(PreemptedError) as raised:
        model.fit(
            x, y, batch_size=4, epochs=3, shuffle=False, verbose=0,
            callbacks=[_SendAt(signum, sent_at), control],
        )  # fmt: skip
    error = raised.value
    assert error.step == stops_after == int(model.optimizer.iterations.numpy())
    assert error.signal_name == signal.Signals(signum).name
    assert error.last_checkpoint == artifacts.checkpoint_path(str(tmp_path), stops_after)
    assert f"after step {stops_after}" in str(error) and "resume" in str(error)
    assert {s: signal.getsignal(s) for s in before} == before  # handlers given back
    assert watch._watchdog is None  # stopped in time: nothing will end the process later
    # The checkpoint holds the stopped model exactly: a fresh model restored from it agrees.
    restored = _model(accumulate)
    checkpoints.restore_checkpoint(restored, error.last_checkpoint)
    for a, b in zip(model.get_weights(), restored.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert int(restored.optimizer.iterations.numpy()) == stops_after


def test_a_preempted_checkpoint_is_kept_only_until_the_next_one(tmp_path):
    """It resumes the run but is not one of the `keep` (nor averaged): the checkpoints a run
    ends with are those of a run that was never stopped."""
    model, directory = _model(1), str(tmp_path)
    steps = lambda: [step for step, _ in artifacts.list_checkpoints(directory)]  # noqa: E731
    for step in (5, 10):
        checkpoints.save_checkpoint(model, directory, step, keep=2)
    checkpoints.save_checkpoint(model, directory, 12, keep=2, run={"replicas": 8}, preempted=True)
    assert steps() == [5, 10, 12]  # 12 pushed no scheduled checkpoint out
    saved = checkpoints.checkpoint_run(artifacts.checkpoint_path(directory, 12))
    assert saved == {"step": 12, "preempted": 1, "replicas": 8}
    checkpoints.save_checkpoint(model, directory, 15, keep=2)
    assert steps() == [10, 15]


def test_grace_period_over_exits_with_the_preempted_status(tmp_path):
    """A step that outlasts the grace period: the watchdog exits with 143 (here recorded)."""
    exited = threading.Event()
    codes = []

    def exit_fn(code):
        codes.append(code)
        exited.set()

    watch = SignalWatch(grace_seconds=0.2, exit_fn=exit_fn)
    watch.install()
    try:
        started = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        assert exited.wait(5), "the watchdog did not fire"
        assert codes == [PREEMPTED_STATUS] and 0.2 <= time.monotonic() - started < 2
    finally:
        watch.uninstall()


def test_grace_period_is_checked():
    with pytest.raises(ValueError, match="preemption_grace_seconds=0"):
        TrainingConfig.from_flat(preemption_grace_seconds=0)
    with pytest.raises(ValueError, match="preemption_grace_seconds='30'"):
        TrainingConfig.from_flat(preemption_grace_seconds="30")


LAUNCHED = textwrap.dedent(
    """
    import signal, sys, time
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    print("ready", flush=True)
    time.sleep(120)
    """
)


def test_launcher_passes_sigterm_to_every_worker_and_exits_with_their_status():
    launcher = subprocess.Popen(
        [
            sys.executable, "-m", "keras_transformer.training.launch", "--workers", "2", "--",
            sys.executable, "-c", LAUNCHED,
        ],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=REPO),
    )  # fmt: skip
    ready = 0
    for line in launcher.stdout:
        ready += line.rstrip().endswith("ready")
        if ready == 2:
            break
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=30) == PREEMPTED_STATUS
    assert "stopping the workers" in launcher.stdout.read()


# End to end (slow) ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("accumulate", [1, 2], ids=["one_device", "accumulate_2"])
def test_sigterm_and_rerun_equals_uninterrupted_run(tmp_path, accumulate, background):
    write_tsv(tmp_path / "pairs.tsv")
    grace, steps, every = 20, 30, 10
    flags = ["--accumulate-steps", str(accumulate), "--preemption-grace-seconds", str(grace)]
    uninterrupted = train_command(tmp_path / "pairs.tsv", tmp_path / "a", *flags, every=every)
    resumed = train_command(tmp_path / "pairs.tsv", tmp_path / "b", *flags, every=every)
    reference = background(uninterrupted, tmp_path / "a-log")  # beside the stopped run
    at = random.randint(3, steps - 3)
    code, seconds, log = sigterm_after_step(resumed, at, grace)
    assert code == PREEMPTED_STATUS, log[-3000:]
    assert seconds <= grace, seconds
    stopped = [line for line in log.splitlines() if line.startswith("stopped: ")]
    assert stopped and "stopped by SIGTERM after step" in stopped[-1], log[-3000:]
    saved = artifacts.latest_checkpoint_in(str(tmp_path / "b" / "checkpoints"))
    saved_step = checkpoints.checkpoint_run(saved)["step"]
    assert at <= saved_step <= at + 2 and saved in stopped[-1], (at, saved)  # nothing lost
    assert checkpoints.checkpoint_run(saved)["preempted"] == (saved_step % every != 0)
    result = run(resumed)
    assert result.returncode == 0, result.stderr[-3000:]
    done = reference.result()
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["resumed_from_step"] == saved_step and summary["steps"] == steps
    # The same checkpoints kept (the preempted one went when step 30's was written), and the
    # same average of the last two.
    assert (
        summary["averaged_checkpoints"]
        == json.loads((tmp_path / "a" / "summary.json").read_text())["averaged_checkpoints"]
    )
    name = "final.weights.h5"
    difference = max_abs_difference(tmp_path / "a" / name, tmp_path / "b" / name)
    print(
        f"accumulate {accumulate}: SIGTERM after step {at}, exit {code} {seconds:.1f}s later, "
        f"checkpoint at {saved_step}; final weights max abs difference {difference:.3g}"
    )
    assert difference <= 1e-6


# A lost task -------------------------------------------------------------------------------------

# TensorFlow's messages, as the surviving worker of a killed chief and of a killed worker saw
# them (tests/test_multi_worker.py), shortened.
LOST_CHIEF = (
    "{{function_node __wrapped__CollectiveReduceV2_Nordering_token_1_device_/job:worker/"
    "replica:0/task:1/device:CPU:0}} Collective ops is aborted by: recvmsg:Connection reset by "
    "peer\nAdditional GRPC error information from remote target /job:worker/replica:0/task:0 "
    "while calling /tensorflow.WorkerService/CompleteInstance:\n:UNKNOWN:Error received from "
    'peer  {grpc_message:"recvmsg:Connection reset by peer", grpc_status:14}'
)
LOST_WORKER = (
    "Graph execution error:\n\nDetected at node CollectiveReduceV2 defined at (most recent "
    "call last):\nCollective ops is aborted by: Error reported from /job:worker/task:1: The "
    "following tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1"
    "\nThe tasks have crashed."
)
LOST_PEER_BY_ADDRESS = (
    "Graph execution error:\n\nDetected at node CollectiveReduceV2\nUNAVAILABLE: failed to "
    "connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:4712: Failed to connect"
)


@pytest.mark.parametrize(
    "cause, task, status",
    [
        (LOST_CHIEF, "worker 0 (127.0.0.1:4711)", "Collective ops is aborted by: recvmsg"),
        (LOST_WORKER, "worker 1 (127.0.0.1:4712)", "Collective ops is aborted by: Error"),
        (LOST_PEER_BY_ADDRESS, "worker 1 (127.0.0.1:4712)", "UNAVAILABLE: failed to connect"),
        ("Graph execution error:\n\nsomething else", None, "Graph execution error:"),
    ],
    ids=["lost_chief", "lost_worker", "address_only", "unnamed"],
)
def test_worker_lost_error_names_the_lost_task(cause, task, status):
    from keras_transformer.training.errors import WorkerLostError

    cluster = {"worker": ["127.0.0.1:4711", "127.0.0.1:4712"]}
    error = WorkerLostError(12, "/run/checkpoints/ckpt-00000010.weights.h5", cause, cluster)
    assert error.lost_task == task
    expected = f"{task} stopped" if task else "a task of the cluster stopped"
    assert str(error).startswith(f"{expected} at about step 12 ({status}")
    assert str(error).endswith("resume from /run/checkpoints/ckpt-00000010.weights.h5")
