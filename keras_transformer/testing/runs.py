"""End-to-end training runs for tests and benchmarks: a toy corpus, the tiny training command of
`pipelines/train_wmt.py`, a subprocess runner, and comparisons of saved weights.

    from keras_transformer.testing.runs import run, train_command, write_tsv
    write_tsv(tmp_path / "pairs.tsv")
    result = run(train_command(tmp_path / "pairs.tsv", tmp_path / "run", steps=12))
    assert result.returncode == 0, result.stderr[-3000:]

The training script is the source checkout's `pipelines/train_wmt.py` (the package is installed
editable there), so these runs test the script a user runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np

from keras_transformer.testing.model_dir import TINY_TRAIN_FLAGS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(REPO, "pipelines", "train_wmt.py")
# The environment of every child: quiet TensorFlow, unbuffered logs (tests read them as they
# come), CPU only.
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="")


def write_tsv(path, n: int = 300) -> None:
    """Write `n` random 2-7 word sentences of a 10-word vocabulary, each paired with itself in
    upper case, as `source<TAB>target` lines: a corpus a one-layer model learns in seconds."""
    rng = np.random.default_rng(0)
    words = ["red", "green", "blue", "house", "tree", "car", "small", "big", "the", "a"]
    with open(path, "w") as f:
        for _ in range(n):
            sentence = " ".join(rng.choice(words, size=rng.integers(2, 8)))
            f.write(f"{sentence}\t{sentence.upper()}\n")


def train_command(tsv, model_dir, *flags: str, steps: int = 30, every: int = 5) -> list[str]:
    """The command line of a tiny training run on `tsv` into `model_dir`: `steps` updates, a
    checkpoint every `every` steps, no evaluation and no export; `flags` come last, so they
    override any flag before them."""
    return [
        sys.executable, TRAIN, "--dataset", f"tsv:{tsv}", "--model-dir", str(model_dir),
        *TINY_TRAIN_FLAGS, "--dropout", "0.1", "--batch-tokens", "256", "--max-length", "32",
        "--warmup-steps", "10", "--train-steps", str(steps), "--steps-per-epoch", "6",
        "--checkpoint-every-steps", str(every), "--keep-checkpoints", "3", "--average-last",
        "2", "--eval-limit", "0", "--export-dir", "none", "--log-every-steps", "1",
        "--eval-every-steps", "0", *flags,
    ]  # fmt: skip


def kill_after_step(command, step, timeout=600):
    """Start `command`, SIGKILL it once its log says `step` is done; returns that step."""
    process = subprocess.Popen(
        command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + timeout
    try:
        for line in process.stderr:
            if f" step {step}/" in line:
                process.send_signal(signal.SIGKILL)
                break
            assert time.monotonic() < deadline, "no progress"
    finally:
        process.kill()
        process.wait()
    assert process.returncode == -signal.SIGKILL
    return step


def sigterm_after_step(command, step, grace):
    """Start `command`, SIGTERM it once its log says `step` is done; returns (exit status,
    seconds from the signal to the exit, stderr)."""
    process = subprocess.Popen(
        command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines = []
    for line in process.stderr:
        lines.append(line)
        if f" step {step}/" in line:
            process.send_signal(signal.SIGTERM)
            break
    sent = time.monotonic()
    _, rest = process.communicate(timeout=grace + 60)
    return process.returncode, time.monotonic() - sent, "".join(lines) + rest


def run(command: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `command` in `ENV` and return it finished, its stdout and stderr captured as text."""
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV)


class Background:
    """`command` started in `ENV` now, its stdout and stderr going to files beside `log_stem`
    (not pipes: a run's log fills a pipe's buffer while the test does something else), so a
    test can run its reference run beside the run it kills or signals. On a 2-core CPU most
    of a tiny run is one thread's Python start-up and tracing: two runs side by side take
    little longer than one.

        reference = Background(train_command(tsv, tmp_path / "a"), tmp_path / "a-log")
        ...  # kill and rerun another run
        done = reference.result()
        assert done.returncode == 0, done.stderr[-3000:]

    A test that fails before `result()` would leave the run going on after it: tests start
    runs through the `background` fixture of `tests/conftest.py`, which `stop`s them at the
    test's end.
    """

    def __init__(self, command: list[str], log_stem) -> None:
        self.command = command
        self._paths = [f"{log_stem}.stdout", f"{log_stem}.stderr"]
        out, err = (open(path, "w") for path in self._paths)
        with out, err:  # the child keeps its own descriptors
            self.process = subprocess.Popen(command, env=ENV, stdout=out, stderr=err, text=True)

    def result(self, timeout: float = 600) -> subprocess.CompletedProcess:
        """Wait for the run (killed after `timeout` seconds: `subprocess.TimeoutExpired`)."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        stdout, stderr = (Path(path).read_text() for path in self._paths)
        return subprocess.CompletedProcess(self.command, self.process.returncode, stdout, stderr)

    def stop(self) -> None:
        """Kill the run if it is still running; nothing if it has ended."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def run_python(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the Python source `code` in a fresh interpreter (e.g. one that sets up 2 CPU devices
    before TensorFlow starts), in `ENV`; stdout and stderr captured as text."""
    return run([sys.executable, "-c", code], timeout=timeout)


def printed_max_difference(code: str, timeout: float = 300) -> float:
    """Run `code`, whose last output is `print("max-difference", value)`, with `run_python`;
    check that it succeeded and return the value (e.g. between weights trained two ways)."""
    result = run_python(code, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return float(result.stdout.split("max-difference")[-1])


def h5_arrays(path) -> dict[str, np.ndarray]:
    """Every dataset of the HDF5 file at `path` (e.g. a `.weights.h5`), by its path in the file."""
    arrays = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, obj: (
                arrays.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return arrays


def max_abs_difference(path_a, path_b) -> float:
    """The largest absolute difference between two weight files with the same datasets."""
    a, b = h5_arrays(path_a), h5_arrays(path_b)
    assert a.keys() == b.keys()
    return max(
        float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64))))
        for k in a
        if a[k].size
    )


def all_finite(path) -> bool:
    """Whether every floating-point value in the HDF5 file at `path` is finite."""
    return all(np.isfinite(v).all() for v in h5_arrays(path).values() if v.dtype.kind == "f")
