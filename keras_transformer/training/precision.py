"""The training run's Keras dtype policy (its `mixed_precision` flag), with "auto" resolved.

"auto" picks "mixed_bfloat16" on a machine without GPUs whose CPU has bfloat16 arithmetic
(the `avx512_bf16` or `amx_bf16` flag of /proc/cpuinfo: oneDNN then runs the matrix products
in bfloat16), and "none" (float32) everywhere else. On such a CPU the default command trained
faster in bfloat16 with the same test BLEU (benchmarks/results/2026-11-25-benchmarks-history.md,
"bfloat16 training on an AMX CPU": `python pipelines/train_wmt.py` with and without
`--mixed-precision mixed_bfloat16`). Without those flags TensorFlow emulates bfloat16 and
nothing is gained (the same file, "Recipe study for the default run", XLA and bfloat16:
`train_benchmark.py --config tiny --vocab-size 4000 --batch-tokens 1536 --length 32 --steps
30 --warmup 3 [--mixed-precision mixed_bfloat16]`), and GPUs were not measured, so they keep
float32.
"""

from __future__ import annotations

from keras_transformer.onednn import cpu_flags, isa_cap

# /proc/cpuinfo flags of x86 CPUs with bfloat16 dot products (AVX512_BF16) or tiles (AMX).
BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# ONEDNN_MAX_CPU_ISA values that keep oneDNN away from those units: under them a bfloat16
# product has no kernel, and TensorFlow aborts ("could not create a primitive descriptor").
NO_BFLOAT16_ISA_CAPS = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI")


def resolve_mixed_precision(name: str, num_gpus: int, flags: set[str] | None = None) -> str:
    """The policy to set for `mixed_precision=name` (`TrainingConfig.distribution`): `name`
    itself unless it is "auto"; then "mixed_bfloat16" for a CPU-only machine whose CPU has one
    of `BFLOAT16_CPU_FLAGS` and whose oneDNN is not capped below them (`ONEDNN_MAX_CPU_ISA`, as
    `benchmarks/run.py ... --cpu-isa avx2` sets it), else "none". `flags` defaults to this
    machine's `cpu_flags()`."""
    if name != "auto":
        return name
    if num_gpus:
        return "none"
    return "mixed_bfloat16" if has_bfloat16_arithmetic(flags) else "none"


def has_bfloat16_arithmetic(flags: set[str] | None = None) -> bool:
    """Whether oneDNN runs bfloat16 products natively here: the CPU has one of
    `BFLOAT16_CPU_FLAGS` (`flags`, default this machine's `cpu_flags()`) and
    `ONEDNN_MAX_CPU_ISA` (or `DNNL_MAX_CPU_ISA`: `onednn.isa_cap`) does not cap oneDNN
    below them."""
    if isa_cap() in NO_BFLOAT16_ISA_CAPS:
        return False
    flags = cpu_flags() if flags is None else flags
    return any(flag in flags for flag in BFLOAT16_CPU_FLAGS)
