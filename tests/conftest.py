"""Shared pytest set-up: TensorFlow backend, quiet logs, a fixed seed and a fresh Keras session."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402  (the backend must be chosen before Keras is imported)
import pytest  # noqa: E402

from keras_transformer import malloc  # noqa: E402

malloc.keep_freed_memory()  # as every command does (keras_transformer.cli.common.run)


@pytest.fixture(autouse=True)
def _seeded_fresh_session():
    """Every test starts from seed 0 and leaves no layers or name counters behind."""
    keras.utils.set_random_seed(0)
    yield
    keras.backend.clear_session()
