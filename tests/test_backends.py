"""Every public layer and the model give TensorFlow's numbers under the JAX and PyTorch backends.

The TensorFlow side runs here; each other backend runs once, in a subprocess
(`python -m keras_transformer.testing.backend_check IN.npz OUT.npz` with KERAS_BACKEND set),
on the same inputs and weights, and each case of `backend_check.CASES` is one test.
Without the backend's package (`pip install -e ".[backends]"`) the tests skip, except in CI
(CI=true), where a skip would hide a missing install: there they fail.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import keras_transformer.layers
from keras_transformer.testing import backend_check
from keras_transformer.testing.backends import BACKEND_ENV, require

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Tolerance: float32 on CPU, where backends sum matmuls and softmaxes in different orders. The
# largest difference seen is 3e-6 (outputs up to ~12 in magnitude), so an absolute 1e-4 leaves
# room and still catches a real difference (a wrong mask, scale or weight order moves outputs
# by far more).
ATOL = 1e-4
# Cases that fail today under jax and torch: reported (the test ends as xfailed naming them, once
# every other case matched), and the test fails when one starts to pass, to drop it from here.
KNOWN_FAILURES: dict[str, str] = {}  # case -> reason, for a backend bug outside our code


@pytest.fixture(scope="module")
def tensorflow_run(tmp_path_factory):
    """The npz of inputs and weights for the children, and TensorFlow's outputs."""
    inputs = backend_check.make_inputs(seed=0)
    outputs, weights = backend_check.compute_outputs(inputs, seed=0)
    path = tmp_path_factory.mktemp("backends") / "inputs.npz"
    backend_check.save_inputs(path, inputs, weights)
    return path, outputs


@pytest.fixture(scope="module")
def backend_outputs(backend, tensorflow_run, tmp_path_factory) -> dict[str, np.ndarray]:
    """Every output computed under `backend`, by one subprocess."""
    require(backend)
    in_path = tensorflow_run[0]
    out_path = tmp_path_factory.mktemp(backend) / "outputs.npz"
    result = subprocess.run(
        [sys.executable, "-m", "keras_transformer.testing.backend_check", in_path, out_path],
        cwd=REPO_ROOT,
        env={**os.environ, "KERAS_BACKEND": backend, **BACKEND_ENV[backend]},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{backend} run failed:\n{result.stderr[-4000:]}"
    with np.load(out_path) as data:
        outputs = {key: data[key] for key in data.files}
    assert str(outputs.pop("backend")) == backend
    return outputs


def test_cases_cover_every_public_layer():
    layer_cases = [case for name, case in backend_check.CASES.items() if name[:5] != "model"]
    covered = {type(case.make()).__name__ for case in layer_cases}
    assert set(keras_transformer.layers.__all__) <= covered


def case_problems(case: str, want: dict, got: dict, backend: str) -> list[str]:
    """What differs between TensorFlow's outputs of one case and `backend`'s."""
    if f"error.{case}" in got:
        return [f"{case} failed under {backend}:\n{str(got[f'error.{case}'])[-3000:]}"]
    names = sorted(k for k in want if k.startswith(f"{case}."))
    if names != sorted(k for k in got if k.startswith(f"{case}.")):
        return [f"{case}: other outputs under {backend}"]
    problems = []
    for name in names:
        if got[name].shape != want[name].shape:
            problems.append(f"{name}: shape {got[name].shape} != {want[name].shape}")
            continue
        difference = np.max(np.abs(got[name].astype("float64") - want[name]), initial=0.0)
        if not difference <= ATOL:  # also catches NaN
            problems.append(f"{name}: max |{backend} - tensorflow| = {difference:.3g}")
    return problems


@pytest.mark.parametrize("backend", ["jax", "torch"], scope="module")
def test_layers_and_model_match_tensorflow(backend, backend_outputs, tensorflow_run):
    want = tensorflow_run[1]
    problems, known = [], []
    for case in backend_check.CASES:
        found = case_problems(case, want, backend_outputs, backend)
        if case not in KNOWN_FAILURES:
            problems += found
        elif found:
            known.append(f"{case}: {KNOWN_FAILURES[case]}")
        else:
            problems.append(f"{case} now matches under {backend}: remove it from KNOWN_FAILURES")
    assert not problems, "\n".join(problems)
    if known:
        pytest.xfail(f"every other case matches; known failures under {backend}: {known}")
