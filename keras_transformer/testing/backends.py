"""Which Keras backends a test may run under, in a subprocess: the environment each needs and a
check that its package is installed.

    from keras_transformer.testing.backends import BACKEND_ENV, require
    require("jax")  # skips the test without jax (fails it in CI)
    subprocess.run(..., env={**os.environ, "KERAS_BACKEND": "jax", **BACKEND_ENV["jax"]})
"""

from __future__ import annotations

import importlib.util
import os

import pytest

# CPU only: the numbers compared are TensorFlow's on the CPU.
BACKEND_ENV = {"jax": {"JAX_PLATFORMS": "cpu"}, "torch": {"CUDA_VISIBLE_DEVICES": ""}}


def require(package: str) -> None:
    """Skip the calling test when `package` is not installed; fail it instead in CI (CI=true),
    where a skip would hide a missing install."""
    if importlib.util.find_spec(package) is not None:
        return
    reason = f'{package} is not installed (pip install -e ".[backends]")'
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{reason}; CI must run the backend tests, not skip them")
    pytest.skip(reason)
