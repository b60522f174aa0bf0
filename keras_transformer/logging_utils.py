"""Console logging for the entry scripts: our logger at INFO, everything else (TensorFlow's
own chatter) at WARNING, and TensorFlow's C++ start-up lines kept off the terminal."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

# Read by TensorFlow's C++ logging when it starts: 3 keeps INFO, WARNING and ERROR lines
# (oneDNN, cpu_feature_guard, "failed call to cuInit") off stderr; FATAL still shows.
QUIET_TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3"}


def setup_logging(level: int = logging.INFO) -> logging.Logger:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logger = logging.getLogger("keras_transformer")
    logger.setLevel(level)
    return logger


@contextlib.contextmanager
def stderr_to_devnull() -> Iterator[None]:
    """Send file descriptor 2 (C and C++ code's stderr, not only `sys.stderr`) to /dev/null
    inside the block; an exception raised in it still propagates and prints afterwards."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 to redirect
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def import_tensorflow_quietly() -> None:
    """Import TensorFlow without its C++ start-up lines; call it first thing in an entry point.

    Sets `QUIET_TF_ENV` (a variable the user set wins). Two kinds of line print while
    TensorFlow's shared libraries load, before any variable is read, in TF 2.21: CUDA probing
    ("cudart_stub.cc ... Could not find cuda drivers") and absl's "WARNING: All log messages
    before absl::InitializeLog() is called are written to STDERR". Those are hidden by
    importing TensorFlow with fd 2 sent to /dev/null. No effect once TensorFlow is imported.
    """
    if "tensorflow" in sys.modules:
        return
    for key, value in QUIET_TF_ENV.items():
        os.environ.setdefault(key, value)
    with stderr_to_devnull():
        import tensorflow  # noqa: F401
