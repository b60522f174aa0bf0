"""The command-line programs: importable from any directory, installed as console scripts,
quiet about TensorFlow's start-up, and ending a user error with one `error:` line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from keras_transformer.cli import (
    align_corpus,
    average_checkpoints,
    client,
    evaluate,
    export,
    plot_attention,
    prepare_data,
    translate,
    verify_export,
)
from keras_transformer.testing.model_dir import make_model_dir

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "evaluate": evaluate, "translate": translate, "plot-attention": plot_attention,
    "average-checkpoints": average_checkpoints, "export": export,
    "verify-export": verify_export, "client": client, "align-corpus": align_corpus,
    "prepare-data": prepare_data,
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
    # One layer (the default is 2): the commands' plumbing does not depend on the depth, and
    # each command run traces its search faster.
    return make_model_dir(str(tmp_path_factory.mktemp("cli_model")), max_length=24, num_layers=1)


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
        (export, [*flags, "--export-base", missing, "--guided", "--jit-compile"], "--guided"),
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


def test_score_console_script_and_help(capsys):
    from keras_transformer.cli import score

    script = shutil.which("keras-transformer-score")
    assert script, 'keras-transformer-score is not installed: pip install -e ".[dev,serving]"'
    assert "from keras_transformer.cli.score import main" in Path(script).read_text()
    with pytest.raises(SystemExit) as info:
        score.main(["--help"])
    assert info.value.code == 0 and "--alpha" in capsys.readouterr().out


SOURCES = ["Der Hund schläft number 12 and number 13.", "x", "The cat sleeps.", "", "Le chat"]


def _one_by_one(model_dir: str, search, lines: list[str]) -> list[tuple]:
    """Each line translated alone: no batching, no reordering."""
    from keras_transformer import artifacts
    from keras_transformer.decoding import Translator

    model, _, tokenizer = artifacts.load_trained(model_dir)
    translator = Translator(model, tokenizer, search)
    return [translator([line], n_best=search.n_best, return_scores=True) for line in lines]


def test_translate_file_in_input_order_n_best_tsv_and_progress(model_dir, tmp_path, capsys):
    from keras_transformer import SearchOptions

    path = tmp_path / "sources.txt"
    path.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    flags = ["--model-dir", model_dir, "--beam-size", "3", "--max-extra-length", "4"]
    assert translate.main([*flags, "--input", str(path), "--n-best", "2", "--batch-size", "2"]) == 0
    captured = capsys.readouterr()
    assert "translating" in captured.err  # tqdm's bar for a file
    rows = [line.split("\t") for line in captured.out.splitlines()]
    search = SearchOptions(beam_size=3, max_extra_length=4, n_best=2)
    want = _one_by_one(model_dir, search, SOURCES)
    assert [row[:2] for row in rows] == [
        [str(i), str(r)] for i in range(len(SOURCES)) for r in (0, 1)
    ]
    assert [row[3] for row in rows] == [t for texts, _ in want for t in texts[0]]
    scores = [float(row[2]) for row in rows]
    assert scores == pytest.approx([s for _, values in want for s in values[0]], abs=1e-3)
    assert translate.main([*flags, "--input", str(path), "--scores", "--batch-size", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[1] for line in lines] == [texts[0][0] for texts, _ in want]


def test_translate_paragraph_line_is_its_sentences_one_by_one(model_dir, tmp_path, capsys):
    from keras_transformer import SearchOptions

    path = tmp_path / "paragraph.txt"
    path.write_text("Der Hund schläft number 12. The cat sleeps.\nLe chat\n", encoding="utf-8")
    flags = ["--model-dir", model_dir, "--beam-size", "3", "--max-extra-length", "4"]
    assert translate.main([*flags, "--input", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    alone = _one_by_one(model_dir, SearchOptions(beam_size=3, max_extra_length=4),
                        ["Der Hund schläft number 12.", "The cat sleeps.", "Le chat"])  # fmt: skip
    first, second, third = (texts[0][0] for texts, _ in alone)  # each: [[1-best]]
    assert lines == [f"{first} {second}", third]
    # The whole file as one source: the same sentences, its line break kept between them.
    assert translate.main([*flags, "--input", str(path), "--whole-input"]) == 0
    assert capsys.readouterr().out == f"{first} {second}\n{third}\n"  # ends as the file ends
    assert translate.main([*flags, "--input", str(path), "--whole-input", "--n-best", "2"]) == 2
    assert "--whole-input prints one translation" in capsys.readouterr().err


@pytest.mark.slow  # a script run or second export: the default stage passed 6 minutes
def test_translate_sampling_flags(model_dir, capsys, monkeypatch):
    import io

    def run(*argv) -> list[str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(SOURCES) + "\n"))
        status = translate.main(["--model-dir", model_dir, "--max-extra-length", "6", *argv])
        captured = capsys.readouterr()
        assert status == 0, captured.err
        assert "translating" not in captured.err  # stdin: no progress bar
        return captured.out.splitlines()

    first = run("--sampling", "topk", "--top-k", "5", "--seed", "1")
    assert len(first) == len(SOURCES)
    assert run("--sampling", "topk", "--top-k", "5", "--seed", "1") == first
    assert any(run("--sampling", "topk", "--top-k", "5", "--seed", str(s)) != first for s in (2, 3))
    greedy = run("--sampling", "greedy", "--scores")
    assert [g.split("\t")[1] for g in greedy] == run("--beam-size", "1", "--alpha", "0")
    monkeypatch.setattr(sys, "stdin", io.StringIO("Hi\n"))
    assert translate.main(["--model-dir", model_dir, "--sampling", "topp", "--n-best", "2"]) == 2
    assert "--n-best needs beam search" in capsys.readouterr().err
    assert translate.main(["--model-dir", model_dir, "--sampling", "topp", "--top-p", "0"]) == 2
    assert "top_p" in capsys.readouterr().err


def test_translate_is_interactive_when_stdin_is_a_terminal(model_dir, capsys, monkeypatch):
    import io

    from keras_transformer import SearchOptions

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    typed = ["The cat sleeps.", "Der Hund"]
    monkeypatch.setattr(sys, "stdin", Terminal("".join(line + "\n" for line in typed)))
    assert translate.main(["--model-dir", model_dir, "--max-extra-length", "4"]) == 0
    captured = capsys.readouterr()
    want = _one_by_one(model_dir, SearchOptions(max_extra_length=4), typed)
    assert captured.out.splitlines() == [texts[0][0] for texts, _ in want]
    assert captured.err.count("> ") == 3  # one prompt per line, one more before end of input


def test_score_command_in_input_order_with_progress(model_dir, tmp_path, capsys):
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.cli import score
    from keras_transformer.decoding import score_pairs

    targets = ["Der Hund", "", "Die Katze schläft.", "x", "Le chat dort " * 5]
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in zip(SOURCES, targets)), encoding="utf-8")
    argv = ["--model-dir", model_dir, "--input", str(path), "--alpha", "1.0", "--batch-size", "2"]
    assert score.main(argv) == 0
    captured = capsys.readouterr()
    assert "scoring" in captured.err  # tqdm's bar
    model, _, tokenizer = artifacts.load_trained(model_dir)
    want = score_pairs(model, tokenizer, SOURCES, targets, SearchOptions(alpha=1.0))
    rows = [[float(v) for v in line.split("\t")] for line in captured.out.splitlines()]
    for key, column in zip(("log_prob", "per_token", "score"), zip(*rows)):
        assert list(column) == pytest.approx(want[key].tolist(), abs=1e-3), key
    run = _run([sys.executable, "pipelines/score.py", "--model-dir", model_dir],
               stdin="The cat\tDie Katze\nno tab\n")  # fmt: skip
    assert run.returncode == 2 and run.stdout == ""
    assert "error: line 2 has no tab" in run.stderr


def test_one_best_that_found_nothing_is_valid_json():
    from keras_transformer.serving.client import format_results

    # A guided search that finds nothing returns "" with score -inf (the export's contract).
    outputs = {"translations": ["Guten Tag.", ""], "scores": [-0.25, float("-inf")]}
    lines = format_results(["a", "b"], outputs, as_json=True)

    def strict(name):  # JSON has no -Infinity or NaN
        pytest.fail(f"{name} in {lines}")

    rows = [json.loads(line, parse_constant=strict) for line in lines]
    assert [r["scores"] for r in rows] == [-0.25, None]
    assert [r["translations"] for r in rows] == ["Guten Tag.", ""]
    assert format_results(["a", "b"], outputs) == ["-0.2500\tGuten Tag.", "-inf\t"]
