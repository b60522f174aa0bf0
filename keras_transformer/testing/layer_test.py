"""One shared check that every Keras layer of the package must pass (in the keras-hub manner).

    run_layer_test(
        MultiHeadAttention,
        init_kwargs={"num_heads": 2, "key_dim": 8},
        input_data=(query, value),               # positional arrays
        expected_output_shape=(2, 5, 16),
        expected_num_trainable_weights=8,
    )

`input_data` is one array (`layer(x)`), a tuple of arrays (`layer(*arrays)`) or a dict of arrays
(`layer(**arrays)`, e.g. `{"inputs": x, "padding_mask": mask}`); `call_kwargs` adds non-tensor
arguments. `expected_output_shape` is one shape or, for layers returning several tensors, a tuple
of shapes in output order.
"""

from __future__ import annotations

import json
import os
import tempfile

import keras
import numpy as np


def _is_shape(value) -> bool:
    return isinstance(value, tuple | list) and all(
        isinstance(dim, int | type(None)) for dim in value
    )


def _expected_shapes(expected_output_shape) -> list[tuple]:
    if _is_shape(expected_output_shape):
        return [tuple(expected_output_shape)]
    return [tuple(shape) for shape in expected_output_shape]


def _named_arrays(input_data) -> tuple[dict, str]:
    """`({name: array}, kind)` with kind "single", "tuple" or "dict"."""
    if isinstance(input_data, dict):
        return dict(input_data), "dict"
    if isinstance(input_data, tuple | list):
        return {f"input_{i}": array for i, array in enumerate(input_data)}, "tuple"
    return {"input_0": input_data}, "single"


def _call(layer, tensors: dict, kind: str, call_kwargs: dict):
    if kind == "dict":
        return layer(**tensors, **call_kwargs)
    return layer(*tensors.values(), **call_kwargs)


def _symbolic_inputs(arrays: dict) -> dict:
    return {
        name: keras.Input(
            batch_shape=np.shape(array), dtype=str(np.asarray(array).dtype), name=name
        )
        for name, array in arrays.items()
    }


def _flat_outputs(outputs) -> list:
    return list(outputs) if isinstance(outputs, tuple | list) else [outputs]


def _check_config_round_trip(layer_cls, init_kwargs: dict) -> None:
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    json.dumps(config)  # plain JSON values only, never layer objects
    for name, value in init_kwargs.items():
        if isinstance(value, bool | int | float | str):
            assert config[name] == value, f"get_config()[{name!r}]={config[name]!r} != {value!r}"
    revived = layer_cls.from_config(config)
    assert revived.get_config() == config
    serialized = keras.saving.serialize_keras_object(layer)
    json.dumps(serialized)
    assert keras.saving.deserialize_keras_object(serialized).get_config() == config


def _check_shapes(outputs, expected: list[tuple], what: str) -> None:
    flat = _flat_outputs(outputs)
    assert len(flat) == len(expected), f"{what}: {len(flat)} outputs, expected {len(expected)}"
    for i, (output, shape) in enumerate(zip(flat, expected)):
        assert tuple(output.shape) == shape, f"{what} output {i}: {output.shape} != {shape}"


def _check_saving(model: keras.Model, arrays: dict) -> None:
    expected = [keras.ops.convert_to_numpy(y) for y in _flat_outputs(model(arrays))]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "layer_model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    got = [keras.ops.convert_to_numpy(y) for y in _flat_outputs(loaded(arrays))]
    for want, have in zip(expected, got):
        np.testing.assert_allclose(have, want, rtol=0, atol=1e-6)


def _check_training(model: keras.Model, arrays: dict, seed: int = 0) -> None:
    """One SGD step on a mean-squared error: weights move and the loss goes down."""
    train_model = keras.Model(model.inputs, _flat_outputs(model.outputs)[0])
    output_shape = tuple(train_model.outputs[0].shape)
    target = np.random.default_rng(seed).normal(size=output_shape).astype("float32")
    train_model.compile(optimizer=keras.optimizers.SGD(learning_rate=1e-2), loss="mse")
    batch_size = output_shape[0]
    before_weights = [keras.ops.convert_to_numpy(w) for w in train_model.trainable_weights]
    loss_before = train_model.evaluate(arrays, target, batch_size=batch_size, verbose=0)
    history = train_model.fit(arrays, target, batch_size=batch_size, epochs=1, verbose=0)
    loss_after = train_model.evaluate(arrays, target, batch_size=batch_size, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after_weights = [keras.ops.convert_to_numpy(w) for w in train_model.trainable_weights]
    assert all(np.all(np.isfinite(w)) for w in after_weights)
    changed = [not np.array_equal(a, b) for a, b in zip(before_weights, after_weights)]
    assert any(changed), "no trainable weight changed after one fit step"
    assert loss_after < loss_before, f"loss did not decrease: {loss_before} -> {loss_after}"


def run_layer_test(
    layer_cls,
    init_kwargs: dict,
    input_data,
    expected_output_shape,
    expected_num_trainable_weights: int | None = None,
    expected_num_non_trainable_weights: int = 0,
    call_kwargs: dict | None = None,
    run_training_check: bool = True,
    run_saving_check: bool = True,
) -> None:
    """Config round trip, symbolic and eager calls, weight counts, `.keras` saving, one fit step.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        input_data: an array, a tuple of arrays (positional call arguments) or a dict of arrays
            (keyword call arguments).
        expected_output_shape: one shape, or a tuple of shapes for a layer with several outputs.
        expected_num_trainable_weights: checked when given.
        expected_num_non_trainable_weights: checked always.
        call_kwargs: non-tensor call arguments (e.g. `return_attention_scores=True`).
        run_training_check: skip for layers without trainable weights.
        run_saving_check: save and reload a functional model around the layer.
    """
    call_kwargs = call_kwargs or {}
    expected = _expected_shapes(expected_output_shape)
    arrays, kind = _named_arrays(input_data)

    _check_config_round_trip(layer_cls, init_kwargs)

    # Eager call on a fresh layer.
    eager_layer = layer_cls(**init_kwargs)
    eager_outputs = _call(eager_layer, arrays, kind, call_kwargs)
    _check_shapes(eager_outputs, expected, "eager")
    for output in _flat_outputs(eager_outputs):
        assert np.all(np.isfinite(keras.ops.convert_to_numpy(output)))
    if expected_num_trainable_weights is not None:
        assert len(eager_layer.trainable_weights) == expected_num_trainable_weights
    assert len(eager_layer.non_trainable_weights) == expected_num_non_trainable_weights

    # Symbolic call on another fresh layer: same structure, shapes and dtypes as eagerly.
    layer = layer_cls(**init_kwargs)
    inputs = _symbolic_inputs(arrays)
    symbolic_outputs = _call(layer, inputs, kind, call_kwargs)
    _check_shapes(symbolic_outputs, expected, "symbolic")
    for sym, eager in zip(_flat_outputs(symbolic_outputs), _flat_outputs(eager_outputs)):
        assert sym.dtype == keras.backend.standardize_dtype(eager.dtype)
    assert len(layer.trainable_weights) == len(eager_layer.trainable_weights)

    model = keras.Model(inputs, symbolic_outputs)
    if run_saving_check:
        _check_saving(model, arrays)
    if run_training_check:
        _check_training(model, arrays)
