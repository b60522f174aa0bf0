"""Test helpers that live in the package, so tests, benchmarks and subprocesses import them by
module name (e.g. `python -m keras_transformer.testing.backend_check IN.npz OUT.npz`); a test
module never imports another test module. Fixtures live in `tests/conftest.py`.

- `layer_test`: `run_layer_test`, the shared check every public layer passes.
- `layer_inputs`, `numpy_reference`: small layer inputs and masks; NumPy versions of the paper's
  formulas computed from a layer's own weights.
- `model_dir`: a small untrained model directory; the tiny training flags.
- `runs`: end-to-end training runs (a toy corpus, the training command, a subprocess runner)
  and comparisons of saved weights.
- `corpora`: a corpus' pairs as Python strings; a fake TFDS WMT split.
- `backends`, `backend_check`: Keras backends in subprocesses; every layer under each.
- `segmenter_cases`: the sentence segmenter's rule table cases.
- `serving_double`: the TF Serving test double.
"""
