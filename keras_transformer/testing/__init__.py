"""Test helpers that live in the package, so tests and subprocesses import them by module name
(e.g. `python -m keras_transformer.testing.backend_check IN.npz OUT.npz`)."""
