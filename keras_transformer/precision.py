"""The training run's Keras dtype policy (its `mixed_precision` flag), with "auto" resolved.

"auto" picks by device:

- GPUs: "mixed_bfloat16" when every GPU has compute capability 8.0 or more (Ampere, Hopper
  and later: bfloat16 tensor cores, float32's exponent range, no loss scaling),
  "mixed_float16" when every GPU has at least 7.0 (Volta, Turing: float16 tensor cores, with
  the loss scaling that `compile` wraps around the optimizer), and "none" (float32) on older
  GPUs or GPUs that report no compute capability. A machine with mixed GPUs follows its
  weakest. Read from `tf.config.experimental.get_device_details(gpu)["compute_capability"]`
  (`gpu_compute_capabilities`); not measured here: no machine we test on runs TensorFlow on
  a GPU.
- No GPU: "mixed_bfloat16" when the CPU has bfloat16 arithmetic (the `avx512_bf16` or
  `amx_bf16` flag of /proc/cpuinfo: oneDNN then runs the matrix products in bfloat16), else
  "none". On such a CPU the default command trained faster in bfloat16 with the same test
  BLEU (benchmarks/results/2026-11-25-benchmarks-history.md, "bfloat16 training on an AMX
  CPU": `python pipelines/train_wmt.py` with and without `--mixed-precision mixed_bfloat16`).
  Without those flags TensorFlow emulates bfloat16 and nothing is gained (the same file,
  "Recipe study for the default run", XLA and bfloat16: `train_benchmark.py --config tiny
  --vocab-size 4000 --batch-tokens 1536 --length 32 --steps 30 --warmup 3
  [--mixed-precision mixed_bfloat16]`).
"""

from __future__ import annotations

from collections.abc import Sequence

from keras_transformer.onednn import cpu_flags, isa_cap

# /proc/cpuinfo flags of x86 CPUs with bfloat16 dot products (AVX512_BF16) or tiles (AMX).
BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# ONEDNN_MAX_CPU_ISA values that keep oneDNN away from those units: under them a bfloat16
# product has no kernel, and TensorFlow aborts ("could not create a primitive descriptor").
NO_BFLOAT16_ISA_CAPS = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI")


# Compute capabilities from which "auto" picks each GPU policy (bfloat16 tensor cores: 8.0).
BFLOAT16_GPU_CAPABILITY = (8, 0)
FLOAT16_GPU_CAPABILITY = (7, 0)


def resolve_mixed_precision(
    name: str, gpus: Sequence[tuple[int, int] | None] = (), flags: set[str] | None = None
) -> str:
    """The policy to set for `mixed_precision=name` (`TrainingConfig.distribution`): `name`
    itself unless it is "auto" (the module docstring's choice).

    Args:
        name: "auto", "none", "mixed_bfloat16" or "mixed_float16".
        gpus: the compute capability `(major, minor)` of each GPU (None: not reported);
            empty on a machine without GPUs (`gpu_compute_capabilities()` gives this
            machine's).
        flags: the CPU's /proc/cpuinfo flags, for a machine without GPUs; default this
            machine's `cpu_flags()`.
    """
    if name != "auto":
        return name
    if gpus:
        weakest = min(gpu or (0, 0) for gpu in gpus)
        if weakest >= BFLOAT16_GPU_CAPABILITY:
            return "mixed_bfloat16"
        return "mixed_float16" if weakest >= FLOAT16_GPU_CAPABILITY else "none"
    return "mixed_bfloat16" if has_bfloat16_arithmetic(flags) else "none"


def gpu_compute_capabilities() -> list[tuple[int, int] | None]:
    """The compute capability `(major, minor)` of each GPU TensorFlow sees (None where the
    device reports none, as ROCm GPUs do); empty without GPUs."""
    import tensorflow as tf  # here, not at import: the CPU half of this module needs none

    found = []
    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        found.append(tuple(capability) if capability else None)
    return found


def has_bfloat16_arithmetic(flags: set[str] | None = None) -> bool:
    """Whether oneDNN runs bfloat16 products natively here: the CPU has one of
    `BFLOAT16_CPU_FLAGS` (`flags`, default this machine's `cpu_flags()`) and
    `ONEDNN_MAX_CPU_ISA` (or `DNNL_MAX_CPU_ISA`: `onednn.isa_cap`) does not cap oneDNN
    below them."""
    if isa_cap() in NO_BFLOAT16_ISA_CAPS:
        return False
    flags = cpu_flags() if flags is None else flags
    return any(flag in flags for flag in BFLOAT16_CPU_FLAGS)
