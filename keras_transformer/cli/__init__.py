"""The command-line programs, one module per command, each with `main(argv=None) -> int`.

Installed as console scripts (`keras-transformer-translate`, ...; see setup.py), runnable as
`python -m keras_transformer.cli.<command>`, and called by the thin scripts in `pipelines/`
and `export/`. `common` holds the shared flags and `run`, which keeps TensorFlow's start-up
lines off the terminal and turns user errors into one `error: ...` line (`--debug` shows the
traceback).
"""
