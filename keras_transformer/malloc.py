"""glibc `malloc` settings that keep TensorFlow's CPU tensors off `mmap`.

TensorFlow allocates CPU tensors with the C library's `malloc`. With glibc's defaults every
block above the mmap threshold (128 KiB, rising to at most 32 MiB) is a fresh `mmap` and is
unmapped again when freed, so each training step pays page faults for its large tensors (the
logits of a batch: tokens x vocabulary floats), and `tf.data.Dataset.from_generator` pins the
trim threshold at 128 KiB besides ("Memory patch applied: M_TRIM_THRESHOLD=128 kb"), which
hands freed heap back to the kernel as well. The kernel time, page faults and step times with
and without these settings: benchmarks/results/2026-11-25-benchmarks-history.md, "glibc malloc
and tf.data autotuning" (`/usr/bin/time python pipelines/train_wmt.py --train-steps 120
--eval-every-steps 0 --eval-limit 0 --export-dir none ...`, with
`KERAS_TRANSFORMER_MALLOC=default` for glibc's settings).

`keep_freed_memory()` turns `mmap` off for `malloc` and keeps a large pad on top of the heap:
freed blocks are reused by the next step instead of being returned and faulted in again.
The price is a resident size that stays at its peak, which is the process's business: the
package's commands (`keras_transformer.cli`) call it at start-up, and importing
`keras_transformer` or any of its modules changes nothing. A program that uses the library
(its own `model.fit`, `Runner`, `trainer.train`) calls `keep_freed_memory()` itself, before
its first tensors, if it wants the same. `KERAS_TRANSFORMER_MALLOC=default` leaves glibc's
settings alone in the commands too.
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
    """Set glibc's `malloc` to keep freed memory (see the module docstring). The package's
    commands call it at start-up; a program using the library calls it itself, once, before
    its first tensors (importing the package never does).

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
