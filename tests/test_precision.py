"""The training dtype policy's "auto" choice (`keras_transformer.precision`)."""

import pytest

from keras_transformer import precision
from keras_transformer.config import TrainingConfig
from keras_transformer.precision import cpu_flags, resolve_mixed_precision

AVX2 = {"fpu", "sse2", "avx", "avx2", "fma"}
AVX512_BF16 = AVX2 | {"avx512f", "avx512_bf16"}
AMX = AVX2 | {"avx512f", "amx_tile", "amx_bf16", "amx_int8"}


A100, H100, V100, T4, P100 = (8, 0), (9, 0), (7, 0), (7, 5), (6, 0)  # compute capabilities


@pytest.mark.parametrize(
    "flags, expected",
    [
        (AVX2, "none"),  # bfloat16 would be emulated: no gain
        (AVX512_BF16, "mixed_bfloat16"),
        (AMX, "mixed_bfloat16"),
        (set(), "none"),  # no /proc/cpuinfo (macOS, Windows)
    ],
)
def test_auto_picks_bfloat16_only_for_a_gpu_less_cpu_with_bfloat16_arithmetic(flags, expected):
    assert resolve_mixed_precision("auto", (), flags) == expected


@pytest.mark.parametrize(
    "gpus, expected",
    [
        ([A100] * 8, "mixed_bfloat16"),
        ([H100], "mixed_bfloat16"),
        ([V100], "mixed_float16"),
        ([T4, T4], "mixed_float16"),
        ([P100], "none"),  # no tensor cores: float32
        ([A100, V100], "mixed_float16"),  # the weakest GPU decides
        ([None], "none"),  # no compute capability reported (ROCm)
    ],
)
def test_auto_picks_by_the_gpus_compute_capability_whatever_the_cpu(gpus, expected):
    for flags in (AVX2, AMX):
        assert resolve_mixed_precision("auto", gpus, flags) == expected


def test_gpu_compute_capabilities_reads_tensorflows_device_details(monkeypatch):
    """Mocked devices: two GPUs, one reporting (8, 0), one nothing (as ROCm's do)."""
    import tensorflow as tf

    gpus = ["GPU:0", "GPU:1"]
    details = {"GPU:0": {"compute_capability": (8, 0), "device_name": "A100"}, "GPU:1": {}}
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind: gpus)
    monkeypatch.setattr(tf.config.experimental, "get_device_details", details.__getitem__)
    assert precision.gpu_compute_capabilities() == [(8, 0), None]
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind: [])
    assert precision.gpu_compute_capabilities() == []


@pytest.mark.parametrize(
    "cap, expected",
    [("AVX2", "none"), ("avx512_core", "none"), ("AVX512_CORE_AMX", "mixed_bfloat16")],
)
def test_auto_keeps_float32_when_onednn_is_capped_below_bfloat16(monkeypatch, cap, expected):
    """Under ONEDNN_MAX_CPU_ISA=AVX2 a bfloat16 product has no oneDNN kernel (TensorFlow
    aborts): "auto" must not pick bfloat16 there, whatever /proc/cpuinfo says."""
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    assert resolve_mixed_precision("auto", (), AMX) == expected


def test_the_older_dnnl_name_caps_too_and_onednn_wins(monkeypatch):
    """oneDNN reads DNNL_MAX_CPU_ISA when ONEDNN_MAX_CPU_ISA is unset (`onednn.isa_cap`)."""
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX2")
    assert resolve_mixed_precision("auto", (), AMX) == "none"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    assert resolve_mixed_precision("auto", (), AMX) == "mixed_bfloat16"


@pytest.mark.parametrize("name", ["none", "mixed_bfloat16", "mixed_float16"])
def test_an_explicit_policy_is_kept_whatever_the_machine(name):
    for flags, gpus in ((AVX2, ()), (AMX, ()), (AMX, [A100, A100]), (AVX2, [V100])):
        assert resolve_mixed_precision(name, gpus, flags) == name


def test_cpu_flags_reads_the_first_processor_of_x86_and_arm_cpuinfo(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text(
        "processor\t: 0\nmodel name\t: Some Xeon\nflags\t\t: fpu avx2 amx_bf16 avx512_bf16\n\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    assert cpu_flags(str(x86)) == {"fpu", "avx2", "amx_bf16", "avx512_bf16"}
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")
    assert cpu_flags(str(arm)) == {"fp", "asimd", "bf16"}
    assert resolve_mixed_precision("auto", (), cpu_flags(str(arm))) == "none"  # not measured
    assert cpu_flags(str(tmp_path / "missing")) == set()


def test_training_config_defaults_to_auto_and_names_a_bad_policy():
    assert TrainingConfig().distribution.mixed_precision == "auto"
    with pytest.raises(ValueError, match="mixed_precision='bfloat16'"):
        TrainingConfig.from_flat(mixed_precision="bfloat16")
