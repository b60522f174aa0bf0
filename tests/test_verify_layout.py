"""`serving.verify.layout_notes`: an export's kernel layouts (`export_info.json`) against the
serving machine's rules, as `keras-transformer-verify-export` prints them."""

import pytest

from keras_transformer.decoding import incremental, padded_kernels
from keras_transformer.serving.verify import layout_notes, machine_layout

AVX2_EXPORT = {"pad_kernels": False, "transpose_kernels": True, "jit_compile": True,
               "traced_on": {"cpu_flags": ["avx2"], "onednn_isa_cap": ""}}  # fmt: skip


def test_the_same_layouts_give_no_note():
    here = {"pad_kernels": False, "transpose_kernels": True}
    assert layout_notes(AVX2_EXPORT, here) == []


def test_a_transposed_export_on_a_machine_that_would_not_transpose_is_named():
    (note,) = layout_notes(AVX2_EXPORT, {"pad_kernels": False, "transpose_kernels": False})
    assert "reads the decoder's kernels transposed" in note and "avx2" in note
    assert note.endswith("--transpose-kernels off")


def test_a_plain_export_on_a_machine_that_would_pad_is_named():
    info = {"pad_kernels": False, "transpose_kernels": False, "jit_compile": False,
            "traced_on": {"cpu_flags": ["avx2", "avx512f"]}}  # fmt: skip
    (note,) = layout_notes(info, {"pad_kernels": True, "transpose_kernels": False})
    assert "does not pad the decoder's kernels" in note and "would do so" in note
    assert note.endswith("--pad-kernels on")


def test_an_export_without_the_record_gives_no_note():
    assert layout_notes({}, {"pad_kernels": True, "transpose_kernels": True}) == []


@pytest.mark.parametrize("jit_compile", [True, False])
def test_the_machine_layout_is_the_rules(monkeypatch, jit_compile):
    monkeypatch.setattr(padded_kernels, "default_pad_kernels", lambda: True)
    monkeypatch.setattr(incremental, "transposed_kernels_pay", lambda d_model: d_model >= 512)
    assert machine_layout(512, jit_compile) == {
        "pad_kernels": True,  # the growing search's rule (an XLA export's larger batches)
        "transpose_kernels": jit_compile,  # the growing search never transposes
    }
    assert machine_layout(128, True)["transpose_kernels"] is False
