"""What an export refuses, and how export directories and TF Serving's configs are laid out,
checked without exporting a model: Python and other custom ops are rejected, versions are
numbered past every existing one, n_best cannot exceed the beam size, the model is built in
float32 under a mixed policy, and the config templates in export/ parse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer import SearchOptions, artifacts
from keras_transformer.serving import export as ex
from keras_transformer.serving import op_check
from keras_transformer.tracing import graph_function

ROOT = Path(__file__).resolve().parents[1]
MODEL_NAME = "transformer"


class _Unservable(tf.Module):
    @graph_function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, text):
        lengths = tf.py_function(lambda t: tf.strings.length(t), [text], tf.int32)
        words = tf_text.WhitespaceTokenizer().tokenize(text)
        return {"n": lengths + tf.cast(words.row_lengths(), tf.int32)}


def test_op_check_rejects_python_and_other_custom_ops(tmp_path):
    module = _Unservable()
    tf.saved_model.save(module, str(tmp_path), signatures=module.__call__.get_concrete_function())
    bad = op_check.unservable_ops(str(tmp_path))
    assert "EagerPyFunc" in bad
    assert any(op.startswith("TFText>") for op in bad), bad


def test_next_version_is_one_past_the_highest_numbered_one(tmp_path):
    base = tmp_path / MODEL_NAME
    assert ex.next_version(str(base)) == 1
    for name in ("1", "7", ".tmp-9-x", "backup"):
        (base / name).mkdir(parents=True)
    assert ex.next_version(str(base)) == 8


def test_export_rejects_n_best_above_beam_size(one_layer_model_dir, tmp_path):
    with pytest.raises(ValueError, match="n_best"):
        ex.export_savedmodel(
            one_layer_model_dir, str(tmp_path), search=SearchOptions(beam_size=2), n_best=3
        )


def test_serving_config_templates_parse():
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    with open(ROOT / "export" / "models.config") as f:
        config = text_format.Parse(f.read(), model_server_config_pb2.ModelServerConfig())
    (model,) = config.model_config_list.config
    assert (model.name, model.model_platform) == (MODEL_NAME, "tensorflow")
    assert model.base_path.endswith("/" + MODEL_NAME)
    assert model.model_version_policy.latest.num_versions == 1
    # BatchingParameters is not in the tensorflow-serving-api wheel: check the field names.
    known = {"max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
             "num_batch_threads", "allowed_batch_sizes", "pad_variable_length_inputs"}  # fmt: skip
    text = (ROOT / "export" / "batching.config").read_text()
    fields = re.findall(r"^(\w+)\s*[:{]", text, flags=re.MULTILINE)
    assert fields and set(fields) <= known
    sizes = [int(n) for n in re.findall(r"^allowed_batch_sizes: (\d+)", text, re.MULTILINE)]
    max_batch = int(re.search(r"max_batch_size \{ value: (\d+) \}", text).group(1))
    # TF Serving requires allowed sizes (if any) sorted and ending with max_batch_size.
    assert sizes == sorted(sizes) and (not sizes or sizes[-1] == max_batch)


def test_export_builds_float32_model_under_a_mixed_policy(
    one_layer_model_dir, tmp_path, monkeypatch
):
    import keras

    seen = []
    load_trained = artifacts.load_trained

    def fake_load_trained(*args, **kwargs):  # the real load, then the model's policies
        model = load_trained(*args, **kwargs)[0]
        seen.append({layer.dtype_policy.name for layer in [model, *model._flatten_layers()]})
        raise RuntimeError("stop after loading")

    monkeypatch.setattr(artifacts, "load_trained", fake_load_trained)
    keras.config.set_dtype_policy("mixed_float16")
    try:
        with pytest.raises(RuntimeError, match="stop after loading"):
            ex.export_savedmodel(one_layer_model_dir, str(tmp_path))
        assert keras.config.dtype_policy().name == "mixed_float16"  # restored
    finally:
        keras.config.set_dtype_policy("float32")
    assert seen == [{"float32"}]
