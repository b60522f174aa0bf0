"""oneDNN's CPU kernels for TensorFlow on every x86-64 CPU, not only the newest.

TensorFlow's Linux x86-64 wheels carry two sets of CPU kernels for products, convolutions
and their neighbours: Eigen's and oneDNN's. TensorFlow turns oneDNN on by default only on
CPUs with neural-network features (AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX: its
`DefaultOneDnnPolicy`), so an AVX2 CPU (most AMD EPYC before Zen 4, Xeons before Cascade
Lake, many cloud VMs) runs Eigen's. With oneDNN, beam search and training steps ran faster on
such a CPU: benchmarks/results/2026-11-25-onednn-on-avx2.md, with its commands
(`TF_ENABLE_ONEDNN_OPTS=0|1 python benchmarks/run.py decode --with-peers --cpu-isa avx2`,
and the training runs).

`prefer_onednn()` asks for oneDNN (`TF_ENABLE_ONEDNN_OPTS=1`) before TensorFlow starts: the
commands call it first thing. A value the user set wins (`TF_ENABLE_ONEDNN_OPTS=0` keeps
Eigen's kernels), and it has no effect once TensorFlow is imported, which reads the
variable once. TF Serving reads the same variable: start the server with
`TF_ENABLE_ONEDNN_OPTS=1` in its environment on such CPUs.
"""

from __future__ import annotations

import os
import platform
import sys

ENV_VAR = "TF_ENABLE_ONEDNN_OPTS"
X86_64 = ("x86_64", "amd64")


def prefer_onednn() -> bool:
    """Set `TF_ENABLE_ONEDNN_OPTS=1` unless set already, TensorFlow is imported, or this is
    not an x86-64 machine (on ARM the variable selects other kernels, not measured here).
    Returns whether it set the variable."""
    if ENV_VAR in os.environ or "tensorflow" in sys.modules:
        return False
    if platform.machine().lower() not in X86_64:
        return False
    os.environ[ENV_VAR] = "1"
    return True


def onednn_enabled() -> bool | None:
    """Whether this process's TensorFlow runs oneDNN's kernels (imports TensorFlow); None
    if TensorFlow cannot say."""
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:
        return None
    return bool(_pywrap_util_port.IsMklEnabled())


def cpu_flags(cpuinfo_path: str = "/proc/cpuinfo") -> set[str]:
    """The first processor's feature flags, or an empty set where there is no such file
    (macOS, Windows) or it names none."""
    try:
        with open(cpuinfo_path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return set(value.split())
    except OSError:
        pass
    return set()


# oneDNN's names of instruction sets below AVX-512 (ONEDNN_MAX_CPU_ISA; DNNL_ the old prefix)
_BELOW_AVX512 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2")


def isa_cap() -> str:
    """The instruction set oneDNN is capped to, upper-cased: `ONEDNN_MAX_CPU_ISA`, else its
    older name `DNNL_MAX_CPU_ISA` (oneDNN reads both; the first wins), else ""."""
    return os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA", "")).upper()


def padded_kernels_faster() -> bool:
    """Whether a decoding step's products run faster on kernels padded to rows 16 floats
    wider (`decoding.padded_kernels`): with oneDNN on an x86-64 CPU whose products stop at
    AVX2 (no AVX-512, or oneDNN capped below it by `ONEDNN_MAX_CPU_ISA`). Never with a GPU.
    The measurements behind the rule: benchmarks/results/2026-11-25-kernel-layout.md and
    benchmarks/results/2026-11-26-issue-49-keep-or-drop.md, with their commands. Imports
    TensorFlow."""
    if platform.machine().lower() not in X86_64 or not onednn_enabled():
        return False
    import tensorflow as tf

    if tf.config.list_logical_devices("GPU"):  # the products run there
        return False
    if isa_cap() in _BELOW_AVX512:
        return True
    return "avx512f" not in cpu_flags()
