"""`tracing.graph_function`: our graphs are traced without AutoGraph, and AutoGraph would
change nothing in them (the same ops, the same results), only the time it takes to trace."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest
import tensorflow as tf

from keras_transformer import SearchOptions, TransformerConfig, build_transformer
from keras_transformer.decoding.search import search_ids
from keras_transformer.tracing import graph_function

PACKAGE = Path(__file__).resolve().parents[1] / "keras_transformer"


def _branchy(x):
    if x > 0:  # a Python `if` on a tensor: AutoGraph turns it into `tf.cond`
        return x * 2.0
    return -x


def test_graph_function_traces_without_autograph():
    spec = [tf.TensorSpec([], tf.float32)]
    converted = tf.function(_branchy, input_signature=spec)
    assert float(converted(tf.constant(-3.0))) == 3.0  # AutoGraph's `tf.cond`
    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError):
        graph_function(_branchy, input_signature=spec).get_concrete_function()


def test_graph_function_as_a_decorator_keeps_its_arguments():
    @graph_function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def double(x):
        return x * 2

    assert double(tf.constant([1, 2])).numpy().tolist() == [2, 4]
    assert double.input_signature[0].shape.as_list() == [None]
    positional = graph_function(lambda x: x + 1, [tf.TensorSpec([2], tf.int32)])  # as tf.function
    assert positional.input_signature[0].shape.as_list() == [2]
    with pytest.raises(ValueError, match="autograph=True"):
        graph_function(_branchy, autograph=True)


def test_the_package_traces_through_graph_function_only():
    """Every `tf.function` of the package goes through `graph_function` (the one place that
    says why AutoGraph is off)."""
    pattern = re.compile(r"(?<![\w`])tf\.function\(")
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "tracing.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line.split("#")[0])
    ]
    assert found == []


def _op_counts(function) -> collections.Counter:
    """Op types of a concrete function's graph and of every function it calls."""
    graph = function.graph.as_graph_def()
    counts = collections.Counter(node.op for node in graph.node)
    for library_function in graph.library.function:
        counts.update(node.op for node in library_function.node_def)
    return counts


@pytest.mark.slow  # traces the search twice, once with AutoGraph: ~18 s on a 2-core CPU
def test_autograph_would_trace_the_same_search():
    """The beam search (the code AutoGraph rewrote most) traced with and without AutoGraph:
    the same op types and counts, the same ids and scores. The whole export's graph:
    benchmarks/results/2026-11-29-autograph-off.md."""
    config = TransformerConfig.tiny(40, num_layers=1, d_model=16, d_ff=32, num_heads=2)
    model = build_transformer(config)
    options = SearchOptions(max_extra_length=5)
    spec = [tf.TensorSpec([None, None], tf.int32)]
    search = lambda ids: search_ids(model, ids, options)  # noqa: E731
    plain = graph_function(search, input_signature=spec)
    converted = tf.function(search, input_signature=spec)
    assert _op_counts(plain.get_concrete_function()) == _op_counts(
        converted.get_concrete_function()
    )
    source = tf.constant([[5, 9, 7, 3], [6, 3, 0, 0]])
    (ids, scores), (want_ids, want_scores) = plain(source), converted(source)
    assert ids.numpy().tolist() == want_ids.numpy().tolist()
    assert scores.numpy().tolist() == want_scores.numpy().tolist()
