"""Whether stock TensorFlow Serving can run a SavedModel: every op type of its graphs and
their function libraries must be stock TensorFlow or one of tensorflow-text's SentencePiece
ops (linked into stock TF Serving), none a Python callback, and no `Xla*` op unless the
export is made for XLA.

    bad = unservable_ops("serving/models/transformer/1")   # set(): servable
    ops = saved_model_op_types(export_dir)                 # {"SentencepieceOp", ...}

The registry check runs in a fresh process that imports only tensorflow, so ops registered by
this process's imports (tensorflow_text's) are not taken for stock ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import tensorflow as tf

# tensorflow-text ops that stock TF Serving links in; every other op must be stock TensorFlow.
SENTENCEPIECE_OPS = frozenset(
    {"SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceDetokenizeOp"}
)
# Stock ops that call back into Python: registered everywhere, servable nowhere.
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def read_saved_model(export_dir: str):
    """The `SavedModel` proto of `export_dir/saved_model.pb`."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    return saved_model


def saved_model_op_types(export_dir: str) -> set[str]:
    """Every op type in `saved_model.pb`: the graphs and all their library functions."""
    saved_model = read_saved_model(export_dir)
    ops = set()
    for meta_graph in saved_model.meta_graphs:
        library = meta_graph.graph_def.library
        function_names = {f.signature.name for f in library.function}
        nodes = list(meta_graph.graph_def.node)
        for function in library.function:
            nodes.extend(function.node_def)
        ops.update(n.op for n in nodes if n.op not in function_names)  # calls are not ops
    return ops


_REGISTRY_SCRIPT = """
import json, sys
import tensorflow
from tensorflow.python.framework import op_def_registry
if "tensorflow_text" in sys.modules:
    raise SystemExit("tensorflow_text must not be imported by the op check")
ops = json.loads(sys.stdin.read())
print("UNREGISTERED=" + json.dumps(sorted(op for op in ops if op_def_registry.get(op) is None)))
"""


def unregistered_ops(op_types: set[str]) -> set[str]:
    """The op types unknown to a fresh Python process that imports only tensorflow."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", _REGISTRY_SCRIPT],
        input=json.dumps(sorted(op_types)), capture_output=True, text=True, env=env,
        cwd=tempfile.gettempdir(), timeout=300, check=False,
    )  # fmt: skip
    lines = [x for x in result.stdout.splitlines() if x.startswith("UNREGISTERED=")]
    if result.returncode or not lines:
        raise RuntimeError(f"Op registry check failed:\n{result.stderr[-2000:]}")
    return set(json.loads(lines[-1].removeprefix("UNREGISTERED=")))


def unservable_ops(export_dir: str, allow_xla: bool = False) -> set[str]:
    """Ops of the export that stock TF Serving cannot run: neither stock TF nor SentencePiece,
    Python callbacks, and unless `allow_xla`, `Xla*` ops (they run only through XLA, which
    tensorflow_model_server disables unless started with --xla_cpu_compilation_enabled)."""
    ops = saved_model_op_types(export_dir)
    xla = set() if allow_xla else {op for op in ops if op.startswith("Xla")}
    return (unregistered_ops(ops) - SENTENCEPIECE_OPS) | (ops & PYTHON_OPS) | xla
