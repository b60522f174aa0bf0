"""`graph_function`: `tf.function` without AutoGraph, for every graph this package traces
(searches, scoring, the export's signatures).

    search = graph_function(lambda ids: search_ids(model, ids, options),
                            input_signature=[tf.TensorSpec([None, None], tf.int32)])

Our traced code writes its control flow in TensorFlow ops (`tf.while_loop`, `tf.cond`,
`tf.where`); its Python `if` and `for` run on Python values while tracing. AutoGraph would
rewrite the source of every function it reaches all the same, and wrap each call in its
`converted_call`: the same graphs, traced slower (the export's measurement:
benchmarks/results/2026-11-29-autograph-off.md). Without AutoGraph, a Python `if` or
`while` on a tensor fails while tracing (TensorFlow's `OperatorNotAllowedInGraphError`)
instead of being turned into graph control flow: write `tf.cond` / `tf.while_loop`.

Keras' own `tf.function`s (`model.fit`'s train step) are Keras' and unchanged; AutoGraph does
not convert code that Keras calls (Keras is on its do-not-convert list).
"""

from __future__ import annotations

import tensorflow as tf


def graph_function(fn=None, input_signature=None, **kwargs):
    """`tf.function(fn, input_signature, autograph=False, **kwargs)`, called as `tf.function`
    is (`input_signature` also positional); usable as a decorator, with or without arguments
    (`@graph_function(input_signature=[...])`)."""
    if kwargs.get("autograph", False):
        raise ValueError(
            "graph_function traces without AutoGraph; use tf.function for AutoGraph. "
            f"Received: autograph={kwargs['autograph']!r}"
        )
    kwargs.update(input_signature=input_signature, autograph=False)
    if fn is None:
        return lambda f: tf.function(f, **kwargs)
    return tf.function(fn, **kwargs)
