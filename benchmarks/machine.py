"""The machine a benchmark ran on, for its results (shared by the workloads)."""

from __future__ import annotations

import os
import platform
import sys

from keras_transformer import onednn


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else `platform.processor()`."""
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else platform.processor()


def description() -> str:
    """ "CPU NAME, N cores": the machine line of every result, with the `--cpu-isa` cap if
    one is set and whether TensorFlow runs oneDNN's kernels (once it is imported)."""
    cap = onednn.isa_cap()
    line = f"{cpu_name()}, {os.cpu_count()} cores" + (f", capped to {cap}" if cap else "")
    if "tensorflow" in sys.modules:
        enabled = onednn.onednn_enabled()
        line += "" if enabled is None else f", TensorFlow's oneDNN {'on' if enabled else 'off'}"
    return line


# `--cpu-isa`: the environment variables that cap each library's runtime dispatch (read when
# the library first picks its kernels, so set before any of them runs).
ISA_CAPS = {
    "native": {},
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "CT2_FORCE_CPU_ISA": "AVX2"},
}  # fmt: skip


def cap_cpu_isa(isa: str) -> bool:
    """Cap oneDNN (TensorFlow's and PyTorch's products), MKL and CTranslate2 to `isa` (a key
    of `ISA_CAPS`) in this process; True if anything was capped. TensorFlow's own kernels are
    compiled for AVX, so the cap is a fair stand-in for a CPU without AVX-512 and bfloat16."""
    if isa not in ISA_CAPS:
        raise ValueError(f"isa must be one of {sorted(ISA_CAPS)}. Received: isa={isa!r}")
    os.environ.update(ISA_CAPS[isa])
    return bool(ISA_CAPS[isa])


def emulates_bfloat16(flags: set[str] | None = None) -> bool:
    """Whether TensorFlow and PyTorch emulate bfloat16 here: the CPU lacks bfloat16 arithmetic
    (neither `avx512_bf16` nor `amx_bf16` in `flags`, default this machine's /proc/cpuinfo,
    the flags `--mixed-precision auto` looks for), or `--cpu-isa` capped oneDNN below it."""
    from keras_transformer.precision import has_bfloat16_arithmetic

    return not has_bfloat16_arithmetic(flags)


def accelerator_name() -> str:
    """The accelerators Keras' backend sees, as "NAME x COUNT", or "none" (CPU only).

    Asks the backend in use (JAX, TensorFlow or PyTorch), so that a GPU machine without
    TensorFlow (JAX only) still names its GPU."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        names = [d.device_kind for d in jax.devices() if d.platform != "cpu"]
    elif backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        details = [tf.config.experimental.get_device_details(gpu) for gpu in gpus]
        names = [d.get("device_name", gpu.name) for d, gpu in zip(details, gpus)]
    else:
        import torch

        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return f"{names[0]} x {len(names)}" if names else "none"
