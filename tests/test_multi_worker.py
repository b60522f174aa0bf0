"""Multi-worker training as separate processes on 127.0.0.1 (TF_CONFIG,
MultiWorkerMirroredStrategy): two workers train like one process with two replicas, only the
chief writes, a worker killed mid-run makes the other stop with a clear error (rerunning
both resumes them together), and a stop that one worker decides (early stopping, a time limit)
stops both after the same step.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from keras_transformer import artifacts
from keras_transformer.testing.runs import ENV, max_abs_difference, run, train_command, write_tsv
from keras_transformer.training.launch import free_ports

pytestmark = pytest.mark.slow
LOST_TASK_SECONDS = 60  # BUILD.md: the others exit within a minute of a lost task
LAUNCH = [sys.executable, "-m", "keras_transformer.training.launch", "--workers", "2", "--"]


def test_two_workers_train_like_two_replicas_and_only_the_chief_writes(tmp_path):
    write_tsv(tmp_path / "pairs.tsv")
    workers = run(LAUNCH + train_command(tmp_path / "pairs.tsv", tmp_path / "mw")[2:])
    assert workers.returncode == 0, workers.stdout[-4000:]
    one_process = run(
        train_command(tmp_path / "pairs.tsv", tmp_path / "mirrored", "--strategy", "mirrored",
                      "--cpu-replicas", "2")
    )  # fmt: skip
    assert one_process.returncode == 0, one_process.stderr[-3000:]
    # The dev set's length is known under every strategy: Keras does not warn after each pass.
    for output in (workers.stdout, one_process.stdout + one_process.stderr):
        assert "Your input ran out of data" not in output
    lines = workers.stdout.splitlines()
    trained = [line for line in lines if "Trained a bpe SentencePiece model" in line]
    assert len(trained) == 1 and trained[0].startswith("[worker:0]")
    assert any(line.startswith("[worker:1] done: worker, 30 steps") for line in lines)
    assert any("Waiting for the chief to write" in line for line in lines if "[worker:1]" in line)
    # One tokenizer, one config, one set of checkpoints and logs, written by the chief.
    assert sorted(os.listdir(tmp_path / "mw")) == [
        "checkpoints", "config.json", "final.weights.h5", "logs", "spm.model", "summary.json",
        "training_config.json",
    ]  # fmt: skip
    steps = [step for step, _ in artifacts.list_checkpoints(str(tmp_path / "mw/checkpoints"))]
    assert steps == [20, 25, 30]
    # Same global batches (step i trains on global batch i) and the same initial weights: the
    # losses agree; collective all-reduce sums in another order, and Adam (epsilon 1e-9) turns
    # last-bit differences of near-zero gradients into full-size steps, so they drift apart. CI
    # measured 0, 5e-5, 2e-3, 2.7% relative over the five epochs; a worker on other data or
    # other initial weights differs in the first epoch already.
    mw = json.loads((tmp_path / "mw" / "summary.json").read_text())
    one = json.loads((tmp_path / "mirrored" / "summary.json").read_text())
    assert mw["replicas"] == one["replicas"] == 2
    np.testing.assert_allclose(mw["history"]["loss"][:2], one["history"]["loss"][:2], rtol=1e-3)
    np.testing.assert_allclose(mw["history"]["loss"], one["history"]["loss"], rtol=0.06)
    np.testing.assert_allclose(mw["history"]["val_loss"], one["history"]["val_loss"], rtol=0.05)
    final = "final.weights.h5"
    difference = max_abs_difference(tmp_path / "mw" / final, tmp_path / "mirrored" / final)
    print(
        f"loss 2 workers {mw['history']['loss']}, 1 process x 2 replicas "
        f"{one['history']['loss']}; final weights max abs difference {difference:.3g}"
    )


def _start_worker(command, cluster, index, log):
    env = dict(ENV)
    env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log)


def test_killed_worker_stops_the_other_with_a_clear_error_and_both_resume(tmp_path):
    write_tsv(tmp_path / "pairs.tsv")
    command = train_command(tmp_path / "pairs.tsv", tmp_path / "mw", steps=60)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    with open(tmp_path / "w0.log", "w") as log0, open(tmp_path / "w1.log", "w") as log1:
        chief = _start_worker(command, cluster, 0, log0)
        worker = _start_worker(command, cluster, 1, log1)
        deadline = time.monotonic() + 600
        while " step 12/" not in (tmp_path / "w1.log").read_text():
            assert time.monotonic() < deadline and worker.poll() is None, "no progress"
            time.sleep(0.2)
        worker.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        code = chief.wait(timeout=300)
    stopped_after = time.monotonic() - killed
    log = (tmp_path / "w0.log").read_text()
    error = ([line for line in log.splitlines() if line.startswith("error:")] or [log[-3000:]])[-1]
    assert code == 4, error
    assert error.startswith("error: worker 1 (127.0.0.1:") and " stopped at about step " in error, (
        error
    )
    assert "restart every task with the same command to resume from " in error
    last = artifacts.latest_checkpoint_in(str(tmp_path / "mw" / "checkpoints"))
    assert last is not None and last in error
    print(f"chief stopped {stopped_after:.0f}s after the kill: {error}")
    # Rerun both: they resume from the chief's last checkpoint and finish.
    result = run(LAUNCH + command[2:])
    assert result.returncode == 0, result.stdout[-4000:]
    resumed = [line for line in result.stdout.splitlines() if "Resumed from" in line]
    assert len(resumed) == 2 and all(line.endswith(os.path.basename(last)) for line in resumed)
    summary = json.loads((tmp_path / "mw" / "summary.json").read_text())
    assert summary["steps"] == 60 and summary["resumed_from_step"] >= 10


def _done_steps(stdout: str) -> dict[str, int]:
    """{"worker:0": steps, "worker:1": steps} from the workers' "done: ..." lines."""
    found = {}
    for line in stdout.splitlines():
        match = re.match(r"\[(worker:\d)\] done: (?:worker, )?(\d+) steps", line)
        if match:
            found[match.group(1)] = int(match.group(2))
    return found


def test_a_stop_that_one_worker_decides_stops_every_worker_after_the_same_step(tmp_path):
    """Dev-BLEU early stopping runs in the chief alone and each worker keeps its own clock
    under --train-minutes; before the workers agreed on stops (`RunControl`) the first to
    stop left the other in the next step's collective ops and the run failed ("Collective
    instance N expected type ...")."""
    write_tsv(tmp_path / "pairs.tsv")
    early = train_command(tmp_path / "pairs.tsv", tmp_path / "early")[2:]
    result = run(LAUNCH + early + ["--eval-every-steps", "5", "--early-stopping", "1"])
    assert result.returncode == 0, result.stdout[-4000:]
    history = json.loads((tmp_path / "early" / "dev_bleu.json").read_text())
    bleu = [record["bleu"] for record in history]
    # The chief's decision, recomputed: the first evaluation that is not a new best (none: 30).
    expected = next(
        (record["step"] for i, record in enumerate(history) if i and bleu[i] <= max(bleu[:i])),
        30,
    )
    assert expected < 30, history  # the stop happened before --train-steps
    assert _done_steps(result.stdout) == {"worker:0": expected, "worker:1": expected}
    assert any(
        line.startswith("[worker:1]") and "another worker stopped training" in line
        for line in result.stdout.splitlines()
    )

    limited = train_command(tmp_path / "pairs.tsv", tmp_path / "limited", steps=100000)[2:]
    result = run(LAUNCH + limited + ["--train-minutes", "0.25"])
    assert result.returncode == 0, result.stdout[-4000:]
    steps = _done_steps(result.stdout)
    assert set(steps) == {"worker:0", "worker:1"}, result.stdout[-4000:]
    assert len(set(steps.values())) == 1 and 0 < steps["worker:0"] < 100000, steps
    summary = json.loads((tmp_path / "limited" / "summary.json").read_text())
    assert summary["stopped_by_time_limit"] and summary["steps"] == steps["worker:0"]
    assert "by the 0.25-minute limit" in result.stdout


@contextlib.contextmanager
def _two_workers(command, cluster, logs):
    """Workers 0 and 1 of `cluster` running `command`, each logging to its file of `logs`."""
    with open(logs[0], "w") as log0, open(logs[1], "w") as log1:
        yield [_start_worker(command, cluster, i, log) for i, log in enumerate((log0, log1))]


def _wait_for_step(log_path, step, processes, timeout=600):
    deadline = time.monotonic() + timeout
    while f" step {step}/" not in log_path.read_text():
        assert time.monotonic() < deadline, "no progress"
        assert all(p.poll() is None for p in processes), log_path.read_text()[-3000:]
        time.sleep(0.1)


@pytest.mark.parametrize("signalled", [0, 1], ids=["sigterm_to_chief", "sigterm_to_worker"])
def test_sigterm_to_one_worker_stops_both_at_one_step_and_the_rerun_ends_as_uninterrupted(
    tmp_path, signalled
):
    write_tsv(tmp_path / "pairs.tsv")
    grace, steps = 30, 30
    flags = ("--preemption-grace-seconds", str(grace))
    uninterrupted = run(LAUNCH + train_command(tmp_path / "pairs.tsv", tmp_path / "a", *flags)[2:])
    assert uninterrupted.returncode == 0, uninterrupted.stdout[-4000:]
    command = train_command(tmp_path / "pairs.tsv", tmp_path / "b", *flags)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    logs = [tmp_path / "w0.log", tmp_path / "w1.log"]
    with _two_workers(command, cluster, logs) as workers:
        at = random.randint(6, steps - 6)
        _wait_for_step(logs[signalled], at, workers)
        workers[signalled].send_signal(signal.SIGTERM)
        sent = time.monotonic()
        codes = [worker.wait(timeout=grace + 60) for worker in workers]
    seconds = time.monotonic() - sent
    texts = [log.read_text() for log in logs]
    assert codes == [143, 143], [text[-2000:] for text in texts]
    assert seconds <= grace, seconds
    stopped = [
        [line for line in text.splitlines() if line.startswith("stopped: ")] for text in texts
    ]
    assert all(stopped), texts
    # Both stopped after the same update, and the chief wrote that step's checkpoint.
    steps_stopped = {re.search(r"after step (\d+)", lines[-1]).group(1) for lines in stopped}
    assert len(steps_stopped) == 1, stopped
    (step,) = steps_stopped
    saved = artifacts.latest_checkpoint_in(str(tmp_path / "b" / "checkpoints"))
    assert saved.endswith(f"ckpt-{int(step):08d}.weights.h5") and int(step) >= at, (saved, at)
    result = run(LAUNCH + command[2:])
    assert result.returncode == 0, result.stdout[-4000:]
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["resumed_from_step"] == int(step) and summary["steps"] == steps
    final = "final.weights.h5"
    difference = max_abs_difference(tmp_path / "a" / final, tmp_path / "b" / final)
    print(
        f"SIGTERM to worker {signalled} after step {at}: both stopped after step {step}, "
        f"{seconds:.1f}s after the signal; rerun's final weights max abs difference "
        f"{difference:.3g}"
    )
    assert difference <= 1e-6


def test_a_lost_chief_stops_the_other_worker_with_a_message_that_names_it(tmp_path):
    write_tsv(tmp_path / "pairs.tsv")
    command = train_command(tmp_path / "pairs.tsv", tmp_path / "mw", steps=60)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    logs = [tmp_path / "w0.log", tmp_path / "w1.log"]
    with _two_workers(command, cluster, logs) as workers:
        _wait_for_step(logs[1], 12, workers)
        workers[0].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        code = workers[1].wait(timeout=300)
    seconds = time.monotonic() - killed
    log = logs[1].read_text()
    error = ([line for line in log.splitlines() if line.startswith("error:")] or [log[-3000:]])[-1]
    print(f"worker 1 exited {code} {seconds:.0f}s after the chief was killed: {error}")
    assert code == 4, error
    assert error.startswith(f"error: worker 0 ({cluster['worker'][0]}) stopped at about step "), (
        error
    )
    assert seconds <= LOST_TASK_SECONDS, seconds
    last = artifacts.latest_checkpoint_in(str(tmp_path / "mw" / "checkpoints"))
    result = run(LAUNCH + command[2:])
    assert result.returncode == 0, result.stdout[-4000:]
    summary = json.loads((tmp_path / "mw" / "summary.json").read_text())
    assert summary["steps"] == 60 and summary["resumed_from_step"] == int(last[-19:-11])
