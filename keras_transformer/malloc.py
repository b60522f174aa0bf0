"""glibc `malloc` settings that keep TensorFlow's CPU tensors off `mmap`.

TensorFlow allocates CPU tensors with the C library's `malloc`. With glibc's defaults every
block above the mmap threshold (128 KiB, rising to at most 32 MiB) is a fresh `mmap` and is
unmapped again when freed, so each training step pays page faults for its large tensors
(the base model's logits for a 1024-token batch over 32000 words are 131 MB), and
`tf.data.Dataset.from_generator` pins the trim threshold at 128 KiB besides ("Memory patch
applied: M_TRIM_THRESHOLD=128 kb"), which hands freed heap back to the kernel as well.
Measured on a 2-core CPU (benchmarks/README.md, "glibc malloc"): the quick preset spent 39%
of its CPU time in the kernel, and a step took half the time with freed memory kept.

`keep_freed_memory()` turns `mmap` off for `malloc` and keeps a large pad on top of the heap:
freed blocks are reused by the next step instead of being returned and faulted in again.
The price is a resident size that stays at its peak. Commands call it at start-up; set
`KERAS_TRANSFORMER_MALLOC=default` to leave glibc's settings alone.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

# mallopt parameters, from glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_MAX = -4

ENV_VAR = "KERAS_TRANSFORMER_MALLOC"
TOP_PAD_BYTES = 256 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 2**31 - 1  # mallopt takes an int

log = logging.getLogger(__name__)


def keep_freed_memory() -> bool:
    """Set glibc's `malloc` to keep freed memory (see the module docstring).

    Returns whether the settings were applied: False off glibc (macOS, Windows, musl), when
    `KERAS_TRANSFORMER_MALLOC=default`, or when `mallopt` refuses a value.
    """
    setting = os.environ.get(ENV_VAR, "keep")
    if setting not in ("keep", "default"):
        raise ValueError(f"{ENV_VAR}={setting!r}: expected 'keep' or 'default'")
    if setting == "default" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    values = (
        (M_MMAP_MAX, 0),
        (M_TOP_PAD, TOP_PAD_BYTES),
        (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
    )
    applied = all(libc.mallopt(param, value) == 1 for param, value in values)
    log.debug(
        "glibc malloc: mmap off, top pad %d, trim threshold %d: %s",
        TOP_PAD_BYTES,
        TRIM_THRESHOLD_BYTES,
        applied,
    )
    return applied
