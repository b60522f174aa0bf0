"""Tests for keras_transformer.serving.export: the SavedModel loads without project code and
matches the in-process Translator, its signatures are as TF Serving expects, its ops are
servable, its warm-up file replays, and no input string makes a signature fail; and for
keras_transformer.serving.verify with its command line. What an export refuses is checked
without exporting in test_export_rules.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import DocumentOptions, SearchOptions, artifacts
from keras_transformer.cli import verify_export
from keras_transformer.data.segmenter import segment
from keras_transformer.decoding import Translator
from keras_transformer.decoding.scoring import score_document_tensors
from keras_transformer.serving import export as ex
from keras_transformer.serving import op_check
from keras_transformer.serving.signatures import (
    ALIGN_SIGNATURE,
    NBEST_SIGNATURE,
    SAMPLE_INPUTS,
    SAMPLE_SIGNATURE,
    SCORE_SIGNATURE,
    SEGMENT_SIGNATURE,
    SERVING_SIGNATURE,
    SIGNATURES,
)
from keras_transformer.serving.verify import compare
from keras_transformer.testing.model_dir import SENTENCES, make_model_dir
from keras_transformer.testing.segmenter_cases import SEGMENTER_CASES
from keras_transformer.tracing import graph_function

MODEL_NAME = "transformer"
BEAM_SIZE, ALPHA, N_BEST = 3, 0.6, 2
SEARCH = SearchOptions(beam_size=BEAM_SIZE, alpha=ALPHA)
TEXTS = [SENTENCES[0], SENTENCES[4], "Le chat dort number 7.", "Der Hund schläft.", "x"]
BAD_TEXTS = [b"", b"   \t ", b"\xff\xfe caf\xc3 \x80", "😀 ça va?".encode(), b"word " * 20_000]
QUIET_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
# Twelve sentences in one paragraph, a line break and a blank line inside.
PARAGRAPH = (
    " ".join(SENTENCES[i] for i in range(0, 24, 4))
    + "\n"
    + " ".join(SENTENCES[i] for i in range(24, 48, 4)).replace("number 36.", "number 36.\n")
)
SAMPLING = {"temperature": 1.3, "top_k": 5, "top_p": 0.95, "seed": 3}

# Loads and runs the export in a fresh interpreter that can import tensorflow and
# tensorflow_text but no project code, twice: with `tf.saved_model.load` (every input sent),
# then as TF Serving runs a SavedModel (TF1 graph, the saver's restore op, a session fed only
# `text` or `source`/`target`, so sampling inputs come from the SignatureDef's defaults).
# Prints every output of every signature, strings as hex. A request may name the `signatures` to
# run and skip the `tf.saved_model.load` pass (`"loaded": false`): an XLA export compiles each
# signature it runs, minutes each on a 2-core CPU.
FRESH_PROCESS_SCRIPT = """
import json, os, sys

class BlockProjectImports:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "keras_transformer":
            raise ImportError(f"project code imported while serving: {name}")

sys.meta_path.insert(0, BlockProjectImports())
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)
from tensorflow.core.protobuf import saved_model_pb2

def as_json(value):
    if value.dtype == object:
        return {"hex": [[b.hex() for b in row] for row in value.reshape(len(value), -1)],
                "shape": list(value.shape)}
    return {"values": value.tolist(), "dtype": value.dtype.name}

export_dir, request = sys.argv[1], json.loads(sys.stdin.read())
texts = [bytes.fromhex(t) for t in request["texts"]]
fed = {"text": texts, "source": texts, "target": texts[::-1]}
wanted = request.get("signatures")
result = {"loaded": {}, "session": {}}
loaded = tf.saved_model.load(export_dir) if request.get("loaded", True) else None
for name, function in (loaded.signatures.items() if loaded is not None else ()):
    if wanted is not None and name not in wanted:
        continue
    specs = function.structured_input_signature[1]
    kwargs = {k: tf.constant(fed[k] if k in fed else request["sampling"][k], spec.dtype)
              for k, spec in specs.items()}
    result["loaded"][name] = {k: as_json(v.numpy()) for k, v in function(**kwargs).items()}

saved_model = saved_model_pb2.SavedModel()
with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
    saved_model.ParseFromString(f.read())
(meta_graph,) = saved_model.meta_graphs
saver = meta_graph.saver_def
with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    tf.graph_util.import_graph_def(meta_graph.graph_def, name="")
    variables = os.path.join(export_dir, "variables", "variables")
    session.run(saver.restore_op_name, {saver.filename_tensor_name: variables})
    for name, signature in meta_graph.signature_def.items():
        if name.startswith("__"):  # __saved_model_init_op: run on load, not a signature
            continue
        if wanted is not None and name not in wanted:
            continue
        feed = {info.name: fed[k] for k, info in signature.inputs.items() if k in fed}
        fetch = {k: info.name for k, info in signature.outputs.items()}
        result["session"][name] = {k: as_json(v) for k, v in session.run(fetch, feed).items()}
        result["session"][name]["defaults"] = sorted(signature.defaults)
result["project_modules"] = [m for m in sys.modules if m.split(".")[0] == "keras_transformer"]
print("RESULT=" + json.dumps(result))
"""


# The sizes of conftest's one_layer_model_dir: nothing here depends on the depth, and every
# signature traces, exports and loads faster with one layer.
SIZES = {"num_layers": 1}


@pytest.fixture(scope="module")
def model_dir(one_layer_model_dir):
    return one_layer_model_dir


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


SPEC = tf.TensorSpec([None], tf.string)


def _sampled(translator, texts: list[bytes], sampling: dict) -> dict:
    sample = graph_function(
        lambda t: translator.sample_tensors(t, "sample", **sampling), input_signature=[SPEC]
    )
    return sample(tf.constant(texts))


def _in_process_outputs(translator, texts: list[bytes], sampling: dict) -> dict:
    """What each signature must return for `texts` (`score`: targets are the texts reversed),
    from the in-process Translator traced as the export traces it."""
    n_best = graph_function(
        lambda t: translator.translate_tensors_n_best(t, N_BEST), input_signature=[SPEC]
    )
    score = graph_function(
        lambda s, t: score_document_tensors(translator.model, translator.tokenizer, s, t, ALPHA),
        input_signature=[SPEC, SPEC],
    )
    serve = graph_function(translator.translate_tensors, input_signature=[SPEC])
    text = tf.constant(texts)
    segments = segment(text).segments  # eager, as Python callers run it
    return {
        SERVING_SIGNATURE: serve(text),
        NBEST_SIGNATURE: n_best(text),
        SAMPLE_SIGNATURE: _sampled(translator, texts, sampling),
        SCORE_SIGNATURE: score(text, text[::-1]),
        SEGMENT_SIGNATURE: {
            "segments": segments.to_tensor(default_value=""),
            "num_segments": tf.cast(segments.row_lengths(), tf.int32),
        },
    }


def _assert_outputs_equal(got: dict, want: dict, where: str):
    assert set(got) - {"defaults"} == set(want), where
    for key, value in want.items():
        if value.dtype == tf.string:
            assert got[key]["hex"] == _hex_rows(value), (where, key)
            assert got[key]["shape"] == value.shape.as_list(), (where, key)
        elif value.dtype == tf.int32:
            assert got[key] == {"values": value.numpy().tolist(), "dtype": "int32"}, (where, key)
        else:
            assert got[key]["dtype"] == "float32", (where, key)
            diff = tf.abs(tf.constant(got[key]["values"]) - value)
            assert float(tf.reduce_max(diff)) <= 1e-5, (where, key)


@pytest.mark.slow  # 31 s: a new Python; in process, test_verify_* compare the same outputs
def test_fresh_process_without_project_code_matches_translator(export_dir, translator, tmp_path):
    cases = [text.encode() for _, text, _ in SEGMENTER_CASES]
    texts = [t.encode() for t in TEXTS] + BAD_TEXTS[:3] + [PARAGRAPH.encode()] + cases
    request = {"texts": [t.hex() for t in texts], "sampling": SAMPLING}
    run = subprocess.run(
        [sys.executable, "-I", "-c", FRESH_PROCESS_SCRIPT, export_dir],
        input=json.dumps(request), capture_output=True, text=True,
        cwd=tmp_path, env=QUIET_ENV, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    fresh = json.loads(run.stdout.split("RESULT=")[-1])
    assert fresh["project_modules"] == []
    assert set(fresh["loaded"]) == set(fresh["session"]) == set(SIGNATURES)
    expected = _in_process_outputs(translator, texts, SAMPLING)
    for name, want in expected.items():
        _assert_outputs_equal(fresh["loaded"][name], want, f"loaded {name}")
    assert fresh["loaded"][NBEST_SIGNATURE]["translations"]["shape"] == [len(texts), N_BEST]
    # As TF Serving runs it: weights restored by the saver, omitted inputs from the defaults.
    defaults = {key: value for key, (_, value) in SAMPLE_INPUTS.items()}
    expected[SAMPLE_SIGNATURE] = _sampled(translator, texts, defaults)
    for name, want in expected.items():
        _assert_outputs_equal(fresh["session"][name], want, f"session {name}")
    assert fresh["session"][SAMPLE_SIGNATURE]["defaults"] == sorted(SAMPLE_INPUTS)
    # The segmenter's table cases: the same segments in the SavedModel as in Python.
    segments = fresh["loaded"][SEGMENT_SIGNATURE]["segments"]["hex"][-len(cases) :]
    for row, (rule, _, expected) in zip(segments, SEGMENTER_CASES):
        assert [bytes.fromhex(s).decode() for s in row[: len(expected)]] == expected, rule
    # The paragraph: its sentences translated one by one, joined in order.
    index = texts.index(PARAGRAPH.encode())
    served = bytes.fromhex(fresh["loaded"][SERVING_SIGNATURE]["translations"]["hex"][index][0])
    assert served.decode() == _one_by_one(translator, PARAGRAPH)


def _one_by_one(translator, text: str) -> str:
    """`text`'s sentences each translated alone (as one-sentence requests), joined by its
    own whitespace."""
    alone = Translator(
        translator.model, translator.tokenizer, SEARCH, documents=translator.documents.sentences()
    )
    seg = segment(tf.constant([text]))
    sentences = [s.decode() for s in seg.segments[0].numpy()]
    assert len(sentences) == 12 and b"\n" in seg.separators[0].numpy()
    translations = [alone([s])[0] for s in sentences]
    return seg.join(tf.constant(translations)).numpy()[0].decode()


def _verify_flags(model_dir: str, export_dir: str, weights: str) -> list[str]:
    return [
        "--model-dir", model_dir, "--export-dir", export_dir, "--weights", weights,
        "--limit", "4", "--beam-size", str(BEAM_SIZE), "--alpha", str(ALPHA),
    ]  # fmt: skip


@pytest.mark.slow  # a script run or second export: the default stage passed 6 minutes
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
    other = make_model_dir(str(tmp_path / "other"), seed=1, **SIZES)  # same shapes, other weights
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
    sample = _signature_block(text, SAMPLE_SIGNATURE).replace(", ", ",")
    assert _tensor_info(sample, "inputs", "text") == ("DT_STRING", "(-1)")
    types = {"float64": "DT_DOUBLE", "int64": "DT_INT64"}
    for key, (dtype, _) in SAMPLE_INPUTS.items():
        assert _tensor_info(sample, "inputs", key) == (types[dtype], "()")
    assert len(re.findall(r"inputs\['", sample)) == 1 + len(SAMPLE_INPUTS)
    for key in ("translations", "scores"):
        assert _tensor_info(sample, "outputs", key)[1] == "(-1)"
    score = _signature_block(text, SCORE_SIGNATURE)
    for key in ("source", "target"):
        assert _tensor_info(score, "inputs", key) == ("DT_STRING", "(-1)")
    for key in ("log_prob", "per_token", "score"):
        assert _tensor_info(score, "outputs", key) == ("DT_FLOAT", "(-1)")
    assert len(re.findall(r"inputs\['", score)) == 2 and len(re.findall(r"outputs\['", score)) == 3
    # The CLI's own op list must be covered by ours (ours also walks nested functions).
    cli_ops = set(re.findall(r"'(\w+)'", text.split("contains the following ops:")[1]))
    assert cli_ops <= op_check.saved_model_op_types(export_dir)


def test_ops_are_stock_tensorflow_plus_sentencepiece(export_dir):
    ops = op_check.saved_model_op_types(export_dir)
    assert {"SentencepieceTokenizeOp", "SentencepieceDetokenizeOp", "While"} <= ops
    assert ops & op_check.PYTHON_OPS == set()
    assert not [op for op in ops if op.startswith("Xla")]  # need XLA, off in TF Serving
    # Every op is known to a process without tensorflow_text, except the SentencePiece ones.
    assert op_check.unregistered_ops(ops) == ops & op_check.SENTENCEPIECE_OPS


def stored_traces(saved_model) -> Counter:
    """How many graphs of each traced function a `SavedModel` proto holds: its library's
    `__inference_<name>_<number>` functions counted by name."""
    library = saved_model.meta_graphs[0].graph_def.library
    names = [f.signature.name for f in library.function]
    return Counter(re.sub(r"_\d+$", "", n) for n in names if n.startswith("__inference_"))


def test_each_signature_graph_is_stored_once(export_dir):
    # A SignatureDef given to tf.saved_model.save as a concrete function is stored a second
    # time beside the tracked tf.function's own trace (export size and load time ~doubled).
    saved_model = op_check.read_saved_model(export_dir)
    traces = stored_traces(saved_model)
    methods = ["translate", "translate_nbest", "translate_sample", "score", "segment",
               "translate_markup", "align"]  # fmt: skip
    assert {m: traces[f"__inference_{m}"] for m in methods} == {m: 1 for m in methods}
    signatures = saved_model.meta_graphs[0].signature_def
    assert set(signatures) - {"__saved_model_init_op"} == set(SIGNATURES)  # one method each


def test_signature_defaults_are_the_sampling_defaults(export_dir):
    (meta_graph,) = op_check.read_saved_model(export_dir).meta_graphs
    signature = meta_graph.signature_def[SAMPLE_SIGNATURE]
    defaults = {key: tf.make_ndarray(proto).item() for key, proto in signature.defaults.items()}
    assert defaults == {key: value for key, (_, value) in SAMPLE_INPUTS.items()}
    nodes = {node.name: node.op for node in meta_graph.graph_def.node}
    for key in SAMPLE_INPUTS:  # a request may leave them out
        assert nodes[signature.inputs[key].name.split(":")[0]] == "PlaceholderWithDefault"
    for name in (SERVING_SIGNATURE, NBEST_SIGNATURE, SCORE_SIGNATURE):
        assert not meta_graph.signature_def[name].defaults


def _warmup_requests(export_dir: str) -> list:
    """The `PredictRequest`s of an export's warm-up file, in order."""
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(export_dir, "assets.extra", ex.WARMUP_FILE)
    return [
        prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        for record in tf.data.TFRecordDataset(path)
    ]


def _replay(loaded, request) -> dict:
    """`request` run through its signature of the loaded export, as TF Serving replays it."""
    inputs = {k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
    return loaded.signatures[request.model_spec.signature_name](**inputs)


def test_warmup_requests_cover_every_signature_and_replay(export_dir, loaded):
    requests = _warmup_requests(export_dir)
    assert 0 < len(requests) <= 1000  # TF Serving reads at most 1000 warm-up records
    assert {r.model_spec.signature_name for r in requests} == set(SIGNATURES)
    for request in requests:
        name = request.model_spec.signature_name
        function = loaded.signatures[name]
        assert request.model_spec.name == MODEL_NAME
        assert set(request.inputs) == set(function.structured_input_signature[1])
        out = _replay(loaded, request)
        key = "text" if "text" in request.inputs else "source"  # score and align: source
        batch = len(tf.make_ndarray(request.inputs[key]))
        assert all(value.shape[0] == batch for value in out.values())


def _sampling_tensors(**values) -> dict:
    values = {key: values.get(key, default) for key, (_, default) in SAMPLE_INPUTS.items()}
    return {key: tf.constant(value, SAMPLE_INPUTS[key][0]) for key, value in values.items()}


@pytest.mark.parametrize(
    "signature",
    [
        SERVING_SIGNATURE,
        # The other two share its input checks (signatures.py); 30 s of the default stage.
        pytest.param(NBEST_SIGNATURE, marks=pytest.mark.slow),
        pytest.param(SAMPLE_SIGNATURE, marks=pytest.mark.slow),
    ],
)
def test_bad_inputs_get_one_translation_each(loaded, signature):
    extra = _sampling_tensors() if signature == SAMPLE_SIGNATURE else {}
    out = loaded.signatures[signature](text=tf.constant(BAD_TEXTS), **extra)
    width = [N_BEST] if signature == NBEST_SIGNATURE else []
    assert out["translations"].shape == [len(BAD_TEXTS)] + width
    assert out["scores"].shape == [len(BAD_TEXTS)] + width
    assert bool(tf.reduce_all(tf.math.is_finite(out["scores"])))
    for text in tf.reshape(out["translations"], [-1]).numpy():
        text.decode("utf-8")  # always valid UTF-8, even for invalid input bytes


def test_score_signature_takes_any_strings_and_checks_batch_sizes(loaded):
    score = loaded.signatures[SCORE_SIGNATURE]
    out = score(source=tf.constant(BAD_TEXTS), target=tf.constant(BAD_TEXTS[::-1]))
    assert sorted(out) == ["log_prob", "per_token", "score"]
    for value in out.values():
        assert value.shape == [len(BAD_TEXTS)] and bool(tf.reduce_all(value < 0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="batch sizes differ"):
        score(source=tf.constant(BAD_TEXTS), target=tf.constant(BAD_TEXTS[:2]))


@pytest.mark.parametrize("signature", [SCORE_SIGNATURE, ALIGN_SIGNATURE, SEGMENT_SIGNATURE])
def test_every_text_input_has_the_byte_limit(loaded, signature):
    over = tf.constant(["ok", "x" * 100_001])
    pair = signature != SEGMENT_SIGNATURE
    inputs = {"source": over[::-1], "target": over} if pair else {"text": over}
    name = "source" if pair else "input"
    refused = rf"(?s){name} longer than max_input_bytes=100000.*100001"
    with pytest.raises(tf.errors.InvalidArgumentError, match=refused):
        loaded.signatures[signature](**inputs)


def test_sample_signature_same_seed_same_output_other_seeds_differ(loaded):
    sample = loaded.signatures[SAMPLE_SIGNATURE]
    texts = tf.constant([t.encode() for t in TEXTS])

    def run(seed, **values):
        out = sample(text=texts, **_sampling_tensors(**{"seed": seed, "top_p": 0.9, **values}))
        return _hex_rows(out["translations"]), out["scores"].numpy().tolist()

    first = run(1)
    assert run(1) == first
    assert any(run(seed)[0] != first[0] for seed in (2, 3))
    greedy = run(1, top_k=1)
    assert run(2, top_k=1) == greedy  # top_k 1 is greedy: no randomness left
    with pytest.raises(tf.errors.InvalidArgumentError, match="temperature must be > 0"):
        run(1, temperature=0.0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="top_p must be in"):
        run(1, top_p=0.0)


def test_long_sentence_comes_back_whole_and_oversized_input_is_refused(loaded, translator):
    # 5000 characters, no punctuation: cut into parts, every part translated.
    long = " ".join(f"the cat sleeps number {i}" for i in range(250))[:5000]
    serve = loaded.signatures[SERVING_SIGNATURE]
    out = serve(text=tf.constant([long]))["translations"].numpy()[0].decode()
    assert out == translator([long])[0] and len(out) > 1000
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_input_bytes=100000"):
        serve(text=tf.constant(["ok", "x" * 100_001]))


@pytest.mark.parametrize("batch", [1, 512])
def test_serving_signature_translates_batches_of_any_size(loaded, batch):
    texts = tf.constant([f"cat {i}" for i in range(batch)])
    out = loaded.signatures[SERVING_SIGNATURE](text=texts)
    assert out["translations"].shape == [batch] and out["scores"].shape == [batch]


def test_existing_version_is_never_overwritten(export_dir):
    base = str(Path(export_dir).parents[1])
    with pytest.raises(FileExistsError, match="immutable"):
        ex.save_module(None, base, MODEL_NAME, version=1)
    with pytest.raises(ValueError, match="version"):
        ex.save_module(None, base, MODEL_NAME, version=0)


def _compiled_closure(export_dir: str) -> list:
    """FunctionDefs marked `_XlaMustCompile` and every function they call."""
    (meta_graph,) = op_check.read_saved_model(export_dir).meta_graphs
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
    assert op_check.unservable_ops(export_dir) == {"XlaDynamicUpdateSlice"}  # the fixed-size cache
    assert op_check.unservable_ops(export_dir, allow_xla=True) == set()
    compiled = _compiled_closure(export_dir)
    assert compiled, "no function is marked for XLA compilation"
    for function in compiled:
        types = [a.type for a in function.signature.input_arg] + [
            a.type for a in function.signature.output_arg
        ]
        assert tf.string.as_datatype_enum not in types, function.signature.name
        assert not {n.op for n in function.node_def} & op_check.SENTENCEPIECE_OPS
    # Not the 100,000-byte text: its hundreds of segments take the search without XLA
    # (test_decoding's rows above `xla_max_rows`) and cost ~100 s a signature on a 2-core CPU.
    texts = tf.constant([t.encode() for t in TEXTS] + BAD_TEXTS[:-1])
    jit = tf.saved_model.load(export_dir)
    inputs = {
        SERVING_SIGNATURE: {"text": texts},
        NBEST_SIGNATURE: {"text": texts},
        SAMPLE_SIGNATURE: {"text": texts, **_sampling_tensors(top_k=1)},  # greedy: no draws
        SCORE_SIGNATURE: {"source": texts, "target": texts[::-1]},
    }
    for name, kwargs in inputs.items():
        want, got = loaded.signatures[name](**kwargs), jit.signatures[name](**kwargs)
        for key, value in want.items():
            if value.dtype == tf.string:
                assert _hex_rows(got[key]) == _hex_rows(value), (name, key)
            else:
                assert float(tf.reduce_max(tf.abs(got[key] - value))) <= 1e-4, (name, key)
    _check_width_warmup(export_dir, jit)
    _check_stored_output_kernel(model_dir, export_dir, texts, want=loaded)


def _check_stored_output_kernel(model_dir: str, export_dir: str, texts, want) -> None:
    """An XLA export that reads `E^T` (not transposed kernels) stores it: its checkpoint holds
    the embedding's transpose, and a session restored by the saver (TF Serving's loader)
    serves what the default export `want` serves."""
    info = ex.read_export_info(export_dir)
    assert info["output_kernel_stored"] is not info["transpose_kernels"]
    if not info["output_kernel_stored"]:
        return
    model, _, _ = artifacts.load_trained(model_dir)
    embedding = model.token_embedding.embeddings.numpy()  # (vocab, d_model)
    reader = tf.train.load_checkpoint(os.path.join(export_dir, "variables", "variables"))
    stored = [name for name in reader.get_variable_to_shape_map() if "output_kernel" in name]
    assert len(stored) == 1, stored  # TranslationModule.output_kernel
    np.testing.assert_array_equal(reader.get_tensor(stored[0]), embedding.T)
    request = {  # the served signature as TF Serving runs it: one more XLA compilation
        "texts": [t.hex() for t in texts.numpy().tolist()], "sampling": SAMPLING,
        "signatures": [SERVING_SIGNATURE], "loaded": False,
    }  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-I", "-c", FRESH_PROCESS_SCRIPT, export_dir],
        input=json.dumps(request), capture_output=True, text=True,
        env=QUIET_ENV, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    fresh = json.loads(run.stdout.split("RESULT=")[-1])
    assert (fresh["loaded"], list(fresh["session"])) == ({}, [SERVING_SIGNATURE])
    session = fresh["session"][SERVING_SIGNATURE]
    served = want.signatures[SERVING_SIGNATURE](text=texts)
    assert session["translations"]["hex"] == _hex_rows(served["translations"])
    np.testing.assert_allclose(session["scores"]["values"], served["scores"].numpy(), atol=1e-4)


def _check_width_warmup(export_dir: str, loaded) -> None:
    """An XLA export's warm-up records send a request for each `(rows, width)` bucket of a
    one-sentence request (`serving.warmup.width_shapes`) to each search signature, and each
    replays."""
    from keras_transformer.serving import warmup

    info = ex.read_export_info(export_dir)["warmup"]
    assert info["signatures"] == list(warmup.WIDTH_SIGNATURES["all"])
    requests = _warmup_requests(export_dir)
    longest = warmup.longest_segment(DocumentOptions(), 64)  # make_model_dir's max_length
    assert len(info["rows_and_pieces"]) == len(warmup.width_shapes(longest, cut=True))
    width_records = len(info["signatures"]) * len(info["rows_and_pieces"])
    added = [
        (r.model_spec.signature_name, tf.make_ndarray(r.inputs["text"]).tolist())
        for r in requests[-width_records:]
    ]
    want = [
        (n, rows, pieces) for n in info["signatures"] for rows, pieces in info["rows_and_pieces"]
    ]
    assert [(n, len(texts), len(texts[0].split())) for n, texts in added] == want
    for request in requests[-width_records:]:  # each replays
        out = _replay(loaded, request)
        rows = len(tf.make_ndarray(request.inputs["text"]))
        assert all(value.shape[0] == rows for value in out.values())


def test_export_info_records_what_the_graph_was_built_with(export_dir):
    from keras_transformer.decoding import padded_kernels

    info = ex.read_export_info(export_dir)
    assert info["dtype"] == "float32" and info["jit_compile"] is False
    assert info["transpose_kernels"] is False  # XLA only
    assert info["output_kernel_stored"] is False  # XLA only
    assert info["pad_kernels"] == padded_kernels.default_pad_kernels()  # this machine's rule
    assert info["search"]["beam_size"] == SEARCH.beam_size
    assert info["search"]["alpha"] == SEARCH.alpha
    assert set(info["traced_on"]) == {"cpu_flags", "onednn_isa_cap"}
    assert ex.read_export_info(str(Path(export_dir).parent)) == {}  # no file: {}


@pytest.mark.slow  # a second export (about 60 s on a 2-core CPU)
def test_bfloat16_export_serves_what_the_bfloat16_translator_gives(model_dir, tmp_path):
    """The bfloat16 export: bfloat16 weights, float32 scores, the translations of the
    in-process bfloat16 `Translator` with the same choices; padded kernels as asked."""
    path = ex.export_savedmodel(
        model_dir, str(tmp_path), MODEL_NAME, search=SEARCH, n_best=N_BEST, dtype="bfloat16",
        pad_kernels=False,
    )  # fmt: skip
    info = ex.read_export_info(path)
    assert (info["dtype"], info["pad_kernels"]) == ("bfloat16", False)
    dtypes = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    dtypes = dtypes.get_variable_to_dtype_map()
    floats = [dtype for dtype in dtypes.values() if dtype.is_floating]
    assert floats and all(dtype == tf.bfloat16 for dtype in floats), dtypes
    loaded = tf.saved_model.load(path)
    texts = [b"The cat sleeps.", b"Der Hund schl\xc3\xa4ft number 3.", b""]
    out = loaded.signatures[SERVING_SIGNATURE](text=tf.constant(texts))
    assert out["scores"].dtype == tf.float32 and np.all(np.isfinite(out["scores"].numpy()))
    model, _, tokenizer = artifacts.load_trained(model_dir, dtype="bfloat16")
    want = ex.make_translator(model, tokenizer, SEARCH, pad_kernels=False).translate_tensors(
        tf.constant(texts)
    )
    assert out["translations"].numpy().tolist() == want["translations"].numpy().tolist()
    np.testing.assert_allclose(out["scores"].numpy(), want["scores"].numpy(), atol=1e-5)
