"""Tests for keras_transformer.serving.export: the SavedModel loads without project code and
matches the in-process Translator, its signatures are as TF Serving expects, its ops are
servable, its warm-up file replays, and no input string makes a signature fail; and for
keras_transformer.serving.verify with its command line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer import SearchOptions, artifacts
from keras_transformer.cli import verify_export
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.serving import export as ex
from keras_transformer.serving.signatures import NBEST_SIGNATURE, SERVING_SIGNATURE
from keras_transformer.serving.verify import compare
from keras_transformer.testing.model_dir import SENTENCES, make_model_dir

ROOT = Path(__file__).resolve().parents[1]
MODEL_NAME = "transformer"
BEAM_SIZE, ALPHA, N_BEST = 3, 0.6, 2
SEARCH = SearchOptions(beam_size=BEAM_SIZE, alpha=ALPHA)
TEXTS = [SENTENCES[0], SENTENCES[4], "Le chat dort number 7.", "Der Hund schläft.", "x"]
BAD_TEXTS = [b"", b"   \t ", b"\xff\xfe caf\xc3 \x80", "😀 ça va?".encode(), b"word " * 20_000]
QUIET_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")

# Loads and runs the export in a fresh interpreter that can import tensorflow and
# tensorflow_text but no project code; prints the outputs of both signatures as hex.
FRESH_PROCESS_SCRIPT = """
import json, sys

class BlockProjectImports:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "keras_transformer":
            raise ImportError(f"project code imported while serving: {name}")

sys.meta_path.insert(0, BlockProjectImports())
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)

loaded = tf.saved_model.load(sys.argv[1])
texts = tf.constant([bytes.fromhex(t) for t in json.loads(sys.stdin.read())])
result = {}
for name, function in loaded.signatures.items():
    out = function(text=texts)
    strings = out["translations"].numpy().astype(object)
    result[name] = {
        "translations": [[b.hex() for b in row] for row in strings.reshape(len(strings), -1)],
        "shape": list(out["translations"].shape),
        "scores": out["scores"].numpy().tolist(),
        "scores_dtype": out["scores"].dtype.name,
    }
result["project_modules"] = [m for m in sys.modules if m.split(".")[0] == "keras_transformer"]
print("RESULT=" + json.dumps(result))
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model_dir(str(tmp_path_factory.mktemp("export_model")))


@pytest.fixture(scope="module")
def export_dir(model_dir, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("serving"))
    return ex.export_savedmodel(model_dir, base, MODEL_NAME, search=SEARCH, n_best=N_BEST)


@pytest.fixture(scope="module")
def loaded(export_dir):
    return tf.saved_model.load(export_dir)


@pytest.fixture
def translator(model_dir):
    # Function scope: conftest's clear_session() frees eager SentencePiece resources.
    model, _, tokenizer = artifacts.load_trained(model_dir)
    return ex.make_translator(model, tokenizer, SEARCH)


def _hex_rows(strings) -> list[list[str]]:
    strings = strings.numpy().astype(object)
    return [[b.hex() for b in row] for row in strings.reshape(len(strings), -1)]


def test_layout_is_tf_serving_version_directory(export_dir):
    base = Path(export_dir).parent
    assert Path(export_dir) == base / "1" and base.name == MODEL_NAME
    assert sorted(p.name for p in base.iterdir()) == ["1"]  # no temporary directory left
    assert (Path(export_dir) / "saved_model.pb").is_file()
    assert (Path(export_dir) / "variables" / "variables.index").is_file()
    assert (Path(export_dir) / "assets.extra" / ex.WARMUP_FILE).is_file()


def test_fresh_process_without_project_code_matches_translator(export_dir, translator, tmp_path):
    texts = [t.encode() for t in TEXTS] + BAD_TEXTS[:3]
    run = subprocess.run(
        [sys.executable, "-I", "-c", FRESH_PROCESS_SCRIPT, export_dir],
        input=json.dumps([t.hex() for t in texts]), capture_output=True, text=True,
        cwd=tmp_path, env=QUIET_ENV, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    fresh = json.loads(run.stdout.split("RESULT=")[-1])
    assert fresh["project_modules"] == []
    spec = tf.TensorSpec([None], tf.string)
    expected = {
        SERVING_SIGNATURE: tf.function(translator.translate_tensors, input_signature=[spec]),
        NBEST_SIGNATURE: tf.function(
            lambda text: translator.translate_tensors_n_best(text, n_best=N_BEST),
            input_signature=[spec],
        ),
    }
    assert set(fresh) - {"project_modules"} == set(expected)
    for name, function in expected.items():
        want = function(tf.constant(texts))
        got = fresh[name]
        assert got["translations"] == _hex_rows(want["translations"]), name
        width = [] if name == SERVING_SIGNATURE else [N_BEST]
        assert got["shape"] == [len(texts)] + width
        assert got["scores_dtype"] == "float32"
        assert tf.reduce_max(tf.abs(tf.constant(got["scores"]) - want["scores"])) <= 1e-5


def _verify_flags(model_dir: str, export_dir: str, weights: str) -> list[str]:
    return [
        "--model-dir", model_dir, "--export-dir", export_dir, "--weights", weights,
        "--limit", "4", "--beam-size", str(BEAM_SIZE), "--alpha", str(ALPHA),
    ]  # fmt: skip


def test_verify_matches_the_export_made_with_the_same_search_and_weights(
    model_dir, export_dir, capsys
):
    sources = TEXTS + ["Der Hund schläft number 3."]
    result = compare(model_dir, export_dir, sources, SEARCH, batch_size=2)
    assert result["sentences"] == len(sources) and result["mismatches"] == []
    assert result["max_score_diff"] <= 1e-5
    weights = os.path.join(model_dir, artifacts.FINAL_WEIGHTS)
    assert verify_export.main(_verify_flags(model_dir, export_dir, weights)) == 0
    assert capsys.readouterr().out.startswith("4 sentences, 0 mismatches")


def test_verify_command_loads_weights_and_fails_on_mismatches(
    model_dir, export_dir, tmp_path, capsys
):
    other = make_model_dir(str(tmp_path / "other"), seed=1)  # same shapes, other weights
    weights = os.path.join(other, artifacts.FINAL_WEIGHTS)
    assert verify_export.main(_verify_flags(model_dir, export_dir, weights)) == 1
    out = capsys.readouterr().out
    assert out.startswith("4 sentences, ") and " 0 mismatches" not in out


def _saved_model_cli_show(export_dir: str) -> str:
    run = subprocess.run(
        ["saved_model_cli", "show", "--dir", export_dir, "--all"],
        capture_output=True, text=True, env=QUIET_ENV, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def _signature_block(text: str, name: str) -> str:
    start = text.index(f"signature_def['{name}']:")
    end = text.find("signature_def[", start + 1)
    return text[start : end if end != -1 else len(text)]


def _tensor_info(block: str, kind: str, key: str) -> tuple[str, str]:
    match = re.search(rf"{kind}\['{key}'\] tensor_info:\s+dtype: (\w+)\s+shape: (\S+)", block)
    assert match, f"{kind}[{key!r}] missing in:\n{block}"
    return match.group(1), match.group(2)


def test_saved_model_cli_reports_signatures(export_dir):
    text = _saved_model_cli_show(export_dir)
    for name, shape in ((SERVING_SIGNATURE, "(-1)"), (NBEST_SIGNATURE, f"(-1,{N_BEST})")):
        block = _signature_block(text, name)
        assert "Method name is: tensorflow/serving/predict" in block
        assert _tensor_info(block, "inputs", "text") == ("DT_STRING", "(-1)")
        assert len(re.findall(r"inputs\['", block)) == 1
        outputs = dict(
            translations=_tensor_info(block.replace(", ", ","), "outputs", "translations"),
            scores=_tensor_info(block.replace(", ", ","), "outputs", "scores"),
        )
        assert outputs == {"translations": ("DT_STRING", shape), "scores": ("DT_FLOAT", shape)}
        assert len(re.findall(r"outputs\['", block)) == 2
    # The CLI's own op list must be covered by ours (ours also walks nested functions).
    cli_ops = set(re.findall(r"'(\w+)'", text.split("contains the following ops:")[1]))
    assert cli_ops <= ex.saved_model_op_types(export_dir)


def test_ops_are_stock_tensorflow_plus_sentencepiece(export_dir):
    ops = ex.saved_model_op_types(export_dir)
    assert {"SentencepieceTokenizeOp", "SentencepieceDetokenizeOp", "While"} <= ops
    assert ops & ex.PYTHON_OPS == set()
    assert not [op for op in ops if op.startswith("Xla")]  # need XLA, off in TF Serving
    # Every op is known to a process without tensorflow_text, except the SentencePiece ones.
    assert ex.unregistered_ops(ops) == ops & ex.SENTENCEPIECE_OPS


class _Unservable(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, text):
        lengths = tf.py_function(lambda t: tf.strings.length(t), [text], tf.int32)
        words = tf_text.WhitespaceTokenizer().tokenize(text)
        return {"n": lengths + tf.cast(words.row_lengths(), tf.int32)}


def test_op_check_rejects_python_and_other_custom_ops(tmp_path):
    module = _Unservable()
    tf.saved_model.save(module, str(tmp_path), signatures=module.__call__.get_concrete_function())
    bad = ex.unservable_ops(str(tmp_path))
    assert "EagerPyFunc" in bad
    assert any(op.startswith("TFText>") for op in bad), bad


def test_warmup_requests_cover_both_signatures_and_replay(export_dir, loaded):
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(export_dir, "assets.extra", ex.WARMUP_FILE)
    logs = []
    for record in tf.data.TFRecordDataset(path):
        logs.append(prediction_log_pb2.PredictionLog.FromString(record.numpy()))
    assert 0 < len(logs) <= 1000  # TF Serving reads at most 1000 warm-up records
    requests = [log.predict_log.request for log in logs]
    assert {r.model_spec.signature_name for r in requests} == {
        SERVING_SIGNATURE, NBEST_SIGNATURE
    }  # fmt: skip
    for request in requests:
        assert request.model_spec.name == MODEL_NAME and list(request.inputs) == ["text"]
        text = tf.make_ndarray(request.inputs["text"])
        out = loaded.signatures[request.model_spec.signature_name](text=tf.constant(text))
        assert out["translations"].shape[0] == len(text)


@pytest.mark.parametrize("signature", [SERVING_SIGNATURE, NBEST_SIGNATURE])
def test_bad_inputs_get_one_translation_each(loaded, signature):
    out = loaded.signatures[signature](text=tf.constant(BAD_TEXTS))
    width = [] if signature == SERVING_SIGNATURE else [N_BEST]
    assert out["translations"].shape == [len(BAD_TEXTS)] + width
    assert out["scores"].shape == [len(BAD_TEXTS)] + width
    assert bool(tf.reduce_all(tf.math.is_finite(out["scores"])))
    for text in tf.reshape(out["translations"], [-1]).numpy():
        text.decode("utf-8")  # always valid UTF-8, even for invalid input bytes


def test_long_source_is_truncated_to_max_length(loaded, model_dir):
    # 100 KB -> max_length - 1 pieces + EOS: the same translation as that prefix alone.
    long = b"The cat sleeps number 3. " * 4_000
    max_length = artifacts.load_config(model_dir).max_length
    tokenizer = SubwordTokenizer.from_file(os.path.join(model_dir, artifacts.TOKENIZER_FILE))
    pieces = tokenizer.tokenize(tf.constant([long]))[:, : max_length - 1]
    prefix = tokenizer.sentencepiece.detokenize(pieces)  # (1,)
    assert tokenizer.tokenize(prefix).to_list() == pieces.to_list()
    serve = loaded.signatures[SERVING_SIGNATURE]
    out, short = serve(text=tf.constant([long])), serve(text=prefix)
    assert out["translations"].numpy()[0] == short["translations"].numpy()[0]
    assert abs(float(out["scores"][0]) - float(short["scores"][0])) <= 1e-5


@pytest.mark.parametrize("batch", [1, 512])
def test_batch_sizes(loaded, batch):
    texts = tf.constant([f"cat {i}" for i in range(batch)])
    out = loaded.signatures[SERVING_SIGNATURE](text=texts)
    assert out["translations"].shape == [batch] and out["scores"].shape == [batch]


def test_version_numbering(tmp_path):
    base = tmp_path / MODEL_NAME
    assert ex.next_version(str(base)) == 1
    for name in ("1", "7", ".tmp-9-x", "backup"):
        (base / name).mkdir(parents=True)
    assert ex.next_version(str(base)) == 8


def test_existing_version_is_never_overwritten(export_dir):
    base = str(Path(export_dir).parents[1])
    with pytest.raises(FileExistsError, match="immutable"):
        ex.save_module(None, base, MODEL_NAME, version=1)
    with pytest.raises(ValueError, match="version"):
        ex.save_module(None, base, MODEL_NAME, version=0)


def test_export_rejects_n_best_above_beam_size(model_dir, tmp_path):
    with pytest.raises(ValueError, match="n_best"):
        ex.export_savedmodel(model_dir, str(tmp_path), search=SearchOptions(beam_size=2), n_best=3)


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
    assert sizes == sorted(sizes) and sizes[-1] == max_batch  # TF Serving requires both


def _compiled_closure(export_dir: str) -> list:
    """FunctionDefs marked `_XlaMustCompile` and every function they call."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((Path(export_dir) / "saved_model.pb").read_bytes())
    (meta_graph,) = saved_model.meta_graphs
    library = {f.signature.name: f for f in meta_graph.graph_def.library.function}
    todo = [n for n, f in library.items() if f.attr["_XlaMustCompile"].b]
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in library:
            continue
        seen.add(name)
        for node in library[name].node_def:
            todo.append(node.op)  # a direct call
            for value in node.attr.values():
                todo += [value.func.name] + [f.name for f in value.list.func]
    return [library[n] for n in sorted(seen)]


@pytest.mark.slow
def test_jit_compiled_export_matches_and_keeps_strings_outside_xla(model_dir, loaded, tmp_path):
    export_dir = ex.export_savedmodel(
        model_dir, str(tmp_path), search=SEARCH, n_best=N_BEST, jit_compile=True
    )
    assert ex.unservable_ops(export_dir) == {"XlaDynamicUpdateSlice"}  # the fixed-size cache
    assert ex.unservable_ops(export_dir, allow_xla=True) == set()
    compiled = _compiled_closure(export_dir)
    assert compiled, "no function is marked for XLA compilation"
    for function in compiled:
        types = [a.type for a in function.signature.input_arg] + [
            a.type for a in function.signature.output_arg
        ]
        assert tf.string.as_datatype_enum not in types, function.signature.name
        assert not {n.op for n in function.node_def} & ex.SENTENCEPIECE_OPS
    texts = tf.constant([t.encode() for t in TEXTS] + BAD_TEXTS)
    jit = tf.saved_model.load(export_dir)
    for name in (SERVING_SIGNATURE, NBEST_SIGNATURE):
        want, got = loaded.signatures[name](text=texts), jit.signatures[name](text=texts)
        assert _hex_rows(got["translations"]) == _hex_rows(want["translations"])
        assert float(tf.reduce_max(tf.abs(got["scores"] - want["scores"]))) <= 1e-4


def test_export_builds_float32_model_under_a_mixed_policy(model_dir, tmp_path, monkeypatch):
    import keras

    seen = []

    def fake_load_trained(directory, weights=None):
        seen.append(keras.config.dtype_policy().name)
        raise RuntimeError("stop after loading")

    monkeypatch.setattr(artifacts, "load_trained", fake_load_trained)
    keras.config.set_dtype_policy("mixed_float16")
    try:
        with pytest.raises(RuntimeError, match="stop after loading"):
            ex.export_savedmodel(model_dir, str(tmp_path))
        assert keras.config.dtype_policy().name == "mixed_float16"  # restored
    finally:
        keras.config.set_dtype_policy("float32")
    assert seen == ["float32"]
