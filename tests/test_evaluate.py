"""evaluate_bleu against sacrebleu called directly, attention maps, and the entry scripts."""

import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import sacrebleu

from keras_transformer import DocumentOptions, SearchOptions, artifacts
from keras_transformer.decoding import Translator
from keras_transformer.decoding.attention_maps import attention_maps, plot_attention
from keras_transformer.decoding.evaluation import evaluate_bleu
from keras_transformer.testing.model_dir import SENTENCES, make_model_dir

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model_dir(str(tmp_path_factory.mktemp("model")), vocab_size=64, max_length=24)


@pytest.fixture
def loaded(model_dir):
    # Per test: the autouse seeding (tf.random.set_seed) clears TF's kernel cache, which
    # destroys an eager SentencePiece resource created before it.
    return artifacts.load_trained(model_dir)


def run_script(name, *args, stdin=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "pipelines" / name), *args], input=stdin,
        capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip


def test_evaluate_bleu_matches_sacrebleu_on_written_hypotheses(loaded, tmp_path):
    model, _, tokenizer = loaded
    sources = [SENTENCES[i] for i in (0, 4, 8, 13, 17, 21, 25)]
    sources[2] = "The cat sleeps number 8 and " * 4  # lengths differ: batches get sorted
    search = SearchOptions(beam_size=2, alpha=0.6, max_extra_length=4)
    own = Translator(model, tokenizer, search, documents=DocumentOptions.sentences())(sources)
    # References: the model's own output for some sources, unrelated text for the others,
    # so BLEU and chrF land strictly between 0 and 100.
    references = [own[i] if i % 2 == 0 else "Ein ganz anderer Satz ." for i in range(7)]
    output = tmp_path / "hyps" / "test.hyp.txt"
    result = evaluate_bleu(
        model, tokenizer, list(zip(sources, references)), search,
        batch_size=3, output_path=str(output), progress=False,
    )  # fmt: skip
    hypotheses = output.read_text(encoding="utf-8").splitlines()
    assert hypotheses == own  # input order restored after length-sorted batching
    bleu = sacrebleu.corpus_bleu(hypotheses, [references])
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    intl = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="intl")
    assert 0 < result["bleu"] < 100 and 0 < result["chrf"] < 100
    assert result["bleu"] == pytest.approx(bleu.score)
    assert result["chrf"] == pytest.approx(chrf.score)
    assert result["tokenized_bleu"] == pytest.approx(intl.score)
    assert (
        "tok:13a" in result["bleu_signature"] and "tok:intl" in result["tokenized_bleu_signature"]
    )
    assert result["num_sentences"] == 7 and np.isfinite(result["mean_score"])


def test_attention_maps_and_plot(loaded, tmp_path):
    model, _, tokenizer = loaded
    sentence = "The cat sleeps number 7."
    source_len = len(tokenizer.tokenize([sentence])[0]) + 1  # with EOS
    encoder = attention_maps(model, tokenizer, sentence, kind="encoder")
    assert encoder.weights.shape == (2, 4, source_len, source_len)
    assert encoder.row_tokens == encoder.column_tokens and encoder.row_tokens[-1] == "</s>"
    cross = attention_maps(
        model, tokenizer, sentence, kind="cross", search=SearchOptions(beam_size=2)
    )
    assert cross.weights.shape[:2] == (2, 4) and cross.weights.shape[3] == source_len
    assert cross.weights.shape[2] == len(cross.row_tokens) > 0
    np.testing.assert_allclose(cross.weights.sum(-1), 1.0, atol=1e-5)  # softmax over source
    path = plot_attention(cross, layer=-1, head=None, output_path=str(tmp_path / "c.png"))
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="layer"):
        plot_attention(cross, layer=2, output_path=str(tmp_path / "x.png"))


@pytest.mark.parametrize("script", ["evaluate.py", "translate.py", "plot_attention.py"])
def test_scripts_help(script):
    run = run_script(script, "--help")
    assert run.returncode == 0, run.stderr
    assert "--model-dir" in run.stdout and "--beam-size" in run.stdout


@pytest.mark.slow  # a script run or second export: the default stage passed 6 minutes
def test_translate_script_reads_stdin_and_prints_n_best(model_dir):
    run = run_script(
        "translate.py",
        "--model-dir",
        model_dir,
        "--beam-size",
        "3",
        "--n-best",
        "2",
        "--max-extra-length",
        "3",
        stdin="The cat sleeps.\n\nDer Hund\n",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [line.split("\t") for line in run.stdout.splitlines()]  # index, rank, score, text
    assert [row[0] for row in rows] == ["0", "0", "1", "1", "2", "2"]
    assert [row[1] for row in rows] == ["0", "1"] * 3
    scores = [float(row[2]) for row in rows]
    assert scores[0] >= scores[1] and scores[4] >= scores[5]


@pytest.mark.slow  # a script run or second export: the default stage passed 6 minutes
def test_evaluate_and_plot_scripts_run(model_dir, tmp_path):
    pytest.importorskip("keras_transformer.data.corpus")
    output, report = tmp_path / "hyp.txt", tmp_path / "bleu.json"
    run = run_script(
        "evaluate.py",
        "--model-dir",
        model_dir,
        "--dataset",
        "sample_en_de",
        "--limit",
        "3",
        "--beam-size",
        "2",
        "--max-extra-length",
        "2",
        "--output",
        str(output),
        "--json",
        str(report),
        "--no-progress",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "BLEU" in run.stdout and "chrF2" in run.stdout and "nrefs:1" in run.stdout
    assert len(output.read_text(encoding="utf-8").splitlines()) == 3 and report.exists()
    png = tmp_path / "enc.png"
    run = run_script(
        "plot_attention.py",
        "--model-dir",
        model_dir,
        "--sentence",
        "Le chat",
        "--kind",
        "encoder",
        "--head",
        "0",
        "--output",
        str(png),
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_load_trained_in_bfloat16_rounds_the_weights_and_stays_close(model_dir):
    model32, config, tokenizer = artifacts.load_trained(model_dir)
    model16, _, _ = artifacts.load_trained(model_dir, dtype="bfloat16")
    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored
    assert {str(w.dtype) for w in model16.weights} == {"bfloat16"}
    for w16, w32 in zip(model16.weights, model32.weights):  # rounded: 8 significant bits
        np.testing.assert_allclose(np.asarray(w16.numpy(), "f4"), w32.numpy(), rtol=2**-8)
    source = tokenizer.encode_source(SENTENCES[:6], 24).to_tensor(config.pad_id)  # (6, len)
    inputs = {"source": source, "target": source}
    want = np.asarray(model32(inputs), "f4")  # (6, len, vocab)
    got = np.asarray(model16(inputs).numpy(), "f4")
    scale = np.abs(want).max()
    assert np.abs(got - want).max() < 0.05 * scale  # bfloat16 activations: about 2^-8 each
    assert (got.argmax(-1) == want.argmax(-1)).mean() > 0.9
    with pytest.raises(ValueError, match="dtype='float16'"):
        artifacts.load_trained(model_dir, dtype="float16")
