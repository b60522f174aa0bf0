"""The command-line programs: importable from any directory, installed as console scripts,
quiet about TensorFlow's start-up, and ending a user error with one `error:` line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from keras_transformer.cli import (
    average_checkpoints,
    client,
    evaluate,
    export,
    plot_attention,
    translate,
    verify_export,
)
from keras_transformer.testing.model_dir import make_model_dir

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "evaluate": evaluate, "translate": translate, "plot-attention": plot_attention,
    "average-checkpoints": average_checkpoints, "export": export,
    "verify-export": verify_export, "client": client,
}  # fmt: skip
# Start-up lines of TensorFlow's C++ runtime that must not reach a user's terminal.
START_UP_LINES = ("cpu_feature_guard", "cudart_stub", "absl::InitializeLog", "oneDNN", "cuInit")


def _run(command: list[str], stdin: str | None = None, cwd: Path = ROOT):
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, cwd=cwd,
        timeout=300, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model_dir(str(tmp_path_factory.mktemp("cli_model")), max_length=24)


def test_serving_and_cli_import_from_any_directory(tmp_path):
    code = (
        "import sys, keras_transformer.serving, keras_transformer.serving.client, "
        "keras_transformer.serving.export, keras_transformer.serving.verify, "
        "keras_transformer.cli.export, keras_transformer.testing.serving_double\n"
        "print(keras_transformer.serving.__file__)\n"
        "print('export' in sys.modules)"
    )
    run = _run([sys.executable, "-I", "-c", code], cwd=tmp_path)  # -I: no cwd, no PYTHONPATH
    assert run.returncode == 0, run.stderr[-3000:]
    module_file, top_level_export = run.stdout.splitlines()[-2:]
    assert Path(module_file) == ROOT / "keras_transformer" / "serving" / "__init__.py"
    assert top_level_export == "False"  # no top-level `export` package any more


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_console_script_and_help(name, capsys):
    script = shutil.which(f"keras-transformer-{name}")
    assert script, f'keras-transformer-{name} is not installed: pip install -e ".[dev,serving]"'
    module = COMMANDS[name].__name__
    assert f"from {module} import main" in Path(script).read_text()
    with pytest.raises(SystemExit) as info:
        COMMANDS[name].main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--debug" in out and len(out.splitlines()) > 10  # usage, docstring and flags


def test_missing_model_dir_is_one_error_line(tmp_path):
    missing = tmp_path / "nonexistent"
    run = _run([sys.executable, "pipelines/translate.py", "--model-dir", str(missing)], "Hi\n")
    assert run.returncode == 2
    assert "Traceback" not in run.stderr and run.stdout == ""
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and str(missing) in errors[0], run.stderr


def test_debug_raises_with_the_traceback(tmp_path):
    missing = str(tmp_path / "nonexistent")
    with pytest.raises(FileNotFoundError, match="nonexistent"):
        translate.main(["--model-dir", missing, "--debug"])


def _user_error_cases(model_dir: str, tmp_path: Path) -> list[tuple]:
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    missing = str(tmp_path / "missing")
    flags = ["--model-dir", model_dir]
    return [
        (translate, [*flags, "--beam-size", "0"], "beam_size=0"),
        (translate, [*flags, "--n-best", "5"], "n_best=5"),
        (translate, [*flags, "--input", missing], missing),
        (evaluate, [*flags, "--dataset", f"tsv:{missing}.tsv"], f"{missing}.tsv"),
        (evaluate, [*flags, "--dataset", f"tsv:{empty}"], str(empty)),
        (export, [*flags, "--export-base", missing, "--beam-size=2", "--n-best=3"], "n_best=3"),
        (average_checkpoints, flags, model_dir),
        (verify_export, [*flags, "--export-dir", missing, "--limit", "1"], missing),
        (client, ["--signature", "serving_default", "--n-best", "Hi"], "--n-best"),
    ]  # fmt: skip


def test_user_errors_are_one_line_naming_the_value(model_dir, tmp_path, capsys):
    for command, argv, named in _user_error_cases(model_dir, tmp_path):
        status = command.main(argv)
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert status == 2, (command.__name__, argv, err)
        assert len(errors) == 1 and named in errors[0], (command.__name__, err)
        assert "Traceback" not in err


def _cli_imports_tensorflow_before_main() -> bool:
    code = "import sys, keras_transformer.cli.translate; print('tensorflow' in sys.modules)"
    return _run([sys.executable, "-c", code]).stdout.strip().endswith("True")


def test_help_and_a_short_run_keep_tensorflow_start_up_quiet(model_dir):
    runs = [
        _run([shutil.which("keras-transformer-translate") or "missing", "--help"]),
        _run(
            [
                sys.executable,
                "pipelines/translate.py",
                "--model-dir",
                model_dir,
                "--max-extra-length",
                "2",
            ],
            stdin="The cat sleeps.\n",
        ),  # fmt: skip
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    assert len(runs[1].stdout.splitlines()) == 1
    leaked = [line for run in runs for line in run.stderr.splitlines()
              if any(marker in line for marker in START_UP_LINES)]  # fmt: skip
    assert not _cli_imports_tensorflow_before_main()  # the package import stays light
    assert leaked == []
