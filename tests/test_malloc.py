"""keras_transformer.malloc: glibc keeps freed memory instead of mapping each large block."""

import ctypes
import platform
import subprocess
import sys
import textwrap

import pytest

from keras_transformer import malloc

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")

# Allocates a 64 MiB block and prints the bytes glibc holds in mmapped blocks (mallinfo2's
# hblkhd) while it is live; run in a fresh process so the settings start from glibc's defaults.
_PROBE = textwrap.dedent(
    """
    import ctypes, sys
    from keras_transformer import malloc

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.mallinfo2.restype = MallInfo2
    if sys.argv[1] == "keep":
        assert malloc.keep_freed_memory()
    elif sys.argv[1] == "import":  # the library a program trains with, TensorFlow included
        import keras_transformer, keras_transformer.model, keras_transformer.runner
        import keras_transformer.training.trainer
    block = libc.malloc(64 * 1024 * 1024)
    print(libc.mallinfo2().hblkhd)
    libc.free(ctypes.c_void_p(block))
    """
)


def _mapped_bytes(mode: str) -> int:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True
    )
    return int(result.stdout.split()[-1])


@glibc_only
def test_large_blocks_come_from_the_heap_not_mmap():
    block = 64 * 1024 * 1024
    assert _mapped_bytes("default") >= block  # glibc's default: a block this size is mmapped
    assert _mapped_bytes("keep") < block


@glibc_only
def test_importing_the_library_leaves_glibc_alone():
    """Only the commands keep freed memory: a program importing the package keeps glibc's
    settings (a block this size is still mmapped) until it calls `keep_freed_memory()`."""
    assert _mapped_bytes("import") >= 64 * 1024 * 1024


@glibc_only
def test_applies_by_default_on_glibc(monkeypatch):
    monkeypatch.delenv(malloc.ENV_VAR, raising=False)
    assert malloc.keep_freed_memory()


def test_setting_default_leaves_glibc_alone(monkeypatch):
    monkeypatch.setenv(malloc.ENV_VAR, "default")
    calls = []
    monkeypatch.setattr(ctypes, "CDLL", lambda *args: calls.append(args))
    assert not malloc.keep_freed_memory()
    assert calls == []


def test_bad_setting_names_the_value(monkeypatch):
    monkeypatch.setenv(malloc.ENV_VAR, "fast")
    with pytest.raises(ValueError, match="KERAS_TRANSFORMER_MALLOC='fast'"):
        malloc.keep_freed_memory()
