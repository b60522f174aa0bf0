"""Corpora as users have them: a source and a target file (`text:SRC,TGT`, `--train-source`),
misaligned files refused early, weighted mixes (`SPEC@WEIGHT+...`) in the step-indexed training
stream, `--reverse` for every kind of dataset and split, and a carve-off that cannot leak a
near-duplicate source from train into dev or test."""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from keras_transformer import artifacts
from keras_transformer.config import TrainingConfig
from keras_transformer.data import corpus, mixture
from keras_transformer.data.corpus import SPLITS, CorpusStats, load_corpus, read_pairs, read_split
from keras_transformer.data.corpus_files import normalize_source, text_dataset
from keras_transformer.testing.corpora import numpy_pairs, split_tagged_dataset
from keras_transformer.testing.runs import run, train_command, write_tsv
from keras_transformer.training import preflight

PAIRS = [(f"Sentence number {i}.", f"Satz Nummer {i}.") for i in range(400)]


def _write(path: Path, lines: list[str]) -> Path:
    data = "".join(f"{line}\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def _tsv(path: Path, pairs: list[tuple[str, str]]) -> str:
    return "tsv:" + str(_write(path, [f"{s}\t{t}" for s, t in pairs]))


def _text(tmp_path: Path, pairs: list[tuple[str, str]], name: str = "c", suffix: str = "") -> str:
    source = _write(tmp_path / f"{name}.src{suffix}", [s for s, _ in pairs])
    target = _write(tmp_path / f"{name}.tgt{suffix}", [t for _, t in pairs])
    return text_dataset(source, target)


# Two files: text:SRC,TGT ---------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_text_files_read_the_same_pairs_as_the_equivalent_tsv(tmp_path: Path, suffix: str):
    text = _text(tmp_path, PAIRS, suffix=suffix)
    tsv = _tsv(tmp_path / f"c.tsv{suffix}", PAIRS)
    splits = {split: list(read_pairs(text, split)) for split in SPLITS}
    assert splits == {split: list(read_pairs(tsv, split)) for split in SPLITS}
    assert all(splits.values()) and sorted(sum(splits.values(), [])) == sorted(PAIRS)
    assert list(read_pairs(text, "all")) == PAIRS == list(read_pairs(tsv, "all"))
    assert numpy_pairs(load_corpus(text, "dev")) == splits["dev"]


def test_text_files_report_what_was_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    (tmp_path / "s.txt").write_bytes(b"one\n\n  two \r\nbad \xff\nlong\nthree\n\n\n")
    (tmp_path / "t.txt").write_bytes(b"eins\nleer\nzwei\nkaputt\n" + b"x" * 11 + b"\ndrei\n")
    dataset = text_dataset(tmp_path / "s.txt", tmp_path / "t.txt")  # trailing blanks: ignored
    stats = CorpusStats()
    with caplog.at_level(logging.INFO, logger="keras_transformer"):
        pairs = list(read_pairs(dataset, "all", max_chars=10, stats=stats))
    assert pairs == [("one", "eins"), ("two", "zwei"), ("three", "drei")]
    assert stats == CorpusStats(
        read=8, kept=3, skipped_empty=3, skipped_bad_utf8=1, skipped_too_long=1
    )
    assert f"corpus {dataset}/all: {stats.log_line()}" in caplog.messages


def test_text_sibling_files_are_dev_and_test(tmp_path: Path):
    for split in SPLITS:
        _text(tmp_path, [(f"{split} {i}", f"{split.upper()} {i}") for i in range(5)], split)
    names = {side: tmp_path / f"train.{side}" for side in ("src", "tgt")}
    dataset = text_dataset(names["src"], names["tgt"])
    for split in SPLITS:
        assert read_pairs(dataset, split, limit=1).__next__() == (
            f"{split} 0",
            f"{split.upper()} 0",
        )
    assert len(list(read_pairs(dataset, "train"))) == 5  # nothing carved


def test_misaligned_files_raise_naming_both_files_and_counts(tmp_path: Path):
    source = _write(tmp_path / "train.en", ["a", "b", "c"])
    target = _write(tmp_path / "train.de", ["A", "B"])
    dataset = text_dataset(source, target)
    expected = f"{source} has 3 lines, {target} has 2 lines"
    for call in (read_pairs, load_corpus):
        with pytest.raises(ValueError, match=expected):
            call(dataset, "train")  # at the call, before any pair is read
    model_dir = str(tmp_path / "r")
    cfg = TrainingConfig.from_flat(dataset=f"sample_en_de+{dataset}@2", model_dir=model_dir)
    with pytest.raises(ValueError, match=expected):
        preflight.check_corpus(cfg)  # a misaligned corpus inside a mix
    dev = TrainingConfig.from_flat(dev_dataset=dataset, model_dir=model_dir)
    with pytest.raises(ValueError, match=expected):
        preflight.check_corpus(dev)
    with pytest.raises(ValueError, match="text file not found: .*absent"):
        read_pairs(text_dataset(source, tmp_path / "absent"), "train")


def test_train_cli_refuses_misaligned_files_with_one_error_line(tmp_path: Path):
    source = _write(tmp_path / "s.txt", ["a b", "c d", "e f"])
    target = _write(tmp_path / "t.txt", ["A B", "C D"])
    command = train_command(tmp_path / "unused.tsv", tmp_path / "run")
    started = time.monotonic()
    result = run([*command, "--train-source", str(source), "--train-target", str(target)])
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: Source and target files must have the same number of lines")
    assert f"{source} has 3 lines, {target} has 2 lines" in last
    assert "Traceback" not in result.stderr and time.monotonic() - started < 60


def test_file_pair_flags_and_every_field_has_a_flag(tmp_path: Path):
    from keras_transformer.cli import train

    parser = train.build_parser()
    flags = {action.dest for action in parser._actions}
    assert {field.name for _, field in TrainingConfig.flat_fields()} <= flags
    argv = ["--train-source", "a.en", "--train-target", "a.de", "--test-source", "t.en"]
    argv += ["--test-target", "t.de", "--reverse"]
    cfg = train.training_config(parser.parse_args(argv))
    data = cfg.data
    assert (data.dataset, data.dev_dataset, data.test_dataset, data.reverse) == (
        "text:a.en,a.de",
        None,
        "text:t.en,t.de",
        True,
    )
    assert data.split_dataset("train") == ("text:a.en,a.de", "train")
    assert data.split_dataset("dev") == ("text:a.en,a.de", "dev")  # carved off train
    assert data.split_dataset("test") == ("text:t.en,t.de", "all")  # read whole
    with pytest.raises(ValueError, match="--dev-source and --dev-target go together"):
        train.training_config(parser.parse_args(["--dev-source", "d.en"]))
    with pytest.raises(ValueError, match="split='all' reads a whole tsv:PATH or text:SRC,TGT"):
        read_pairs("sample_en_de", "all")
    from keras_transformer.cli import evaluate

    args = evaluate.build_parser().parse_args(["--model-dir", "m", "--split", "all", "--reverse"])
    assert (args.split, args.reverse) == ("all", True)


# Weighted mixes ---------------------------------------------------------------------------


def _with_siblings(tmp_path: Path, name: str, size: int) -> str:
    """A `tsv:` train file of `size` pairs `(name i, NAME i)` with one-pair dev/test siblings."""
    for split in ("dev", "test"):
        _tsv(tmp_path / f"{name}.{split}.tsv", [(f"{name} {split}", f"{name.upper()} {split}")])
    pairs = [(f"{name} {i}", f"{name.upper()} {i}") for i in range(size)]
    return _tsv(tmp_path / f"{name}.train.tsv", pairs)


def test_mix_gives_each_corpus_its_weighted_share_evenly(tmp_path, caplog):
    a, b = _with_siblings(tmp_path, "a", 30), _with_siblings(tmp_path, "b", 4)
    dataset = f"{a}+{b}@2.5"
    stats = CorpusStats()
    with caplog.at_level(logging.INFO, logger="keras_transformer"):
        epoch = list(read_pairs(dataset, "train", stats=stats))
    assert stats == CorpusStats(read=34, kept=34)  # one read of each corpus
    assert f"corpus {a}+{b}/train: mix epoch of 40 pairs: {a} 30 (30 x 1), {b} 10 (4 x 2.5)" in (
        caplog.messages
    )
    corpus_of = [source.split()[0] for source, _ in epoch]
    assert Counter(corpus_of) == {"a": 30, "b": 10}
    assert [s for s, _ in epoch if s.startswith("a")] == [f"a {i}" for i in range(30)]
    assert [s for s, _ in epoch if s.startswith("b")] == [f"b {i % 4}" for i in range(10)]
    for end in range(1, 41):  # every prefix holds each corpus's share, within one pair
        assert abs(corpus_of[:end].count("b") - end / 4) <= 1
    assert list(read_pairs(dataset, "train")) == epoch  # a pure function of corpora + weights
    assert list(read_pairs(dataset, "train", limit=7)) == epoch[:7]
    assert numpy_pairs(load_corpus(dataset, "train")) == epoch
    assert list(read_pairs(dataset, "dev")) == [("a dev", "A dev")]  # the first corpus's
    assert list(read_pairs(f"{b}@0.5+{a}", "test")) == [("b test", "B test")]
    assert corpus.uses_tfds(f"{a}+wmt14_en_de@0.1") and not corpus.uses_tfds(dataset)


def test_mix_syntax(tmp_path: Path):
    starts = ("tsv:", "text:", "sample_en_de")
    assert mixture.parse_mix("sample_en_de", starts) is None
    assert mixture.parse_mix("tsv:me@home+x.tsv", starts) is None  # `@`, `+` of a file name
    assert mixture.parse_mix("tsv:a.tsv@2", starts) == [mixture.MixPart("tsv:a.tsv", 2.0)]
    assert mixture.parse_mix("sample_en_de+tsv:x+y.tsv@0.5", starts) == [
        mixture.MixPart("sample_en_de", 1.0),
        mixture.MixPart("tsv:x+y.tsv", 0.5),
    ]
    for weight in ("0", "-1", "nan", "inf"):
        with pytest.raises(ValueError, match=f"weight must be a positive number.*@{weight}"):
            read_pairs(f"sample_en_de+sample_en_de@{weight}", "train")
    assert list(mixture.interleave([3, 1, 0])) == [0, 0, 1, 0]  # tie at 2: the lower index


def test_mix_training_stream_is_deterministic_and_resumes_by_skipping(tmp_path: Path):
    from keras_transformer.data.pipeline import make_batches
    from keras_transformer.data.tokenizer import SubwordTokenizer, train_sentencepiece

    write_tsv(tmp_path / "a.tsv", n=120)
    dataset = f"tsv:{tmp_path / 'a.tsv'}+{_text(tmp_path, PAIRS[:40])}@2"
    model = train_sentencepiece(
        (side for pair in read_pairs(dataset, "train") for side in pair),
        str(tmp_path / "spm.model"),
        vocab_size=80,
    )
    tokenizer = SubwordTokenizer.from_file(model)

    def labels(skip: int, count: int) -> list[np.ndarray]:
        batches = make_batches(
            load_corpus(dataset, "train"), tokenizer, 32, 256, cache=True, seed=3,
            skip_batches=skip,
        )  # fmt: skip
        return [labels.numpy() for _, labels in batches.take(count)]

    full = labels(0, 20)  # several passes over the mix's epoch
    assert all(np.array_equal(x, y) for x, y in zip(full, labels(0, 20)))
    assert all(np.array_equal(x, y) for x, y in zip(full[13:], labels(13, 7)))


# --reverse ----------------------------------------------------------------------------------


def test_reverse_swaps_both_sides_of_every_split_and_form(tmp_path: Path):
    """Datasets with fixed splits give the swapped pairs of each split; a carved file gives what
    the file with swapped columns gives (its carve-off goes by the side that is the source)."""
    swapped = [(t, s) for s, t in PAIRS]
    siblings = _with_siblings(tmp_path, "a", 60)
    for dataset in ["sample_en_de", siblings, f"{siblings}+sample_en_de@0.01"]:
        for split in SPLITS:
            forward = list(read_pairs(dataset, split, limit=50))
            backward = list(read_pairs(dataset, split, limit=50, reverse=True))
            assert forward and backward == [(t, s) for s, t in forward], (dataset, split)
    forms = {
        "tsv": (_tsv(tmp_path / "c.tsv", PAIRS), _tsv(tmp_path / "swapped.tsv", swapped)),
        "text": (_text(tmp_path, PAIRS), _text(tmp_path, swapped, "swapped")),
    }
    for dataset, swapped_file in forms.values():
        for split in SPLITS:
            backward = list(read_pairs(dataset, split, reverse=True))
            assert backward and backward == list(read_pairs(swapped_file, split)), split
            graph = load_corpus(dataset, split, reverse=True)
            assert numpy_pairs(graph) == backward, (dataset, split)
    text = forms["text"][0]
    mix = list(read_pairs(f"{text}+{siblings}@0.5", "train", reverse=True))
    assert [p for p in mix if p[0].startswith("Satz")] == list(
        read_pairs(text, "train", reverse=True)
    )
    assert [p for p in mix if p[0].startswith("A ")] == [(f"A {i}", f"a {i}") for i in range(30)]
    cfg = TrainingConfig.from_flat(dataset=text, test_dataset=text, reverse=True)
    assert list(read_split(cfg.data, "test")) == swapped  # an explicit test file: read whole


def test_reverse_swaps_wmt(tmp_path: Path):
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(as_dataset_fn=split_tagged_dataset):
        pairs = list(read_pairs("wmt14_en_de", "test", data_dir=str(tmp_path), reverse=True))
        graph = load_corpus("wmt14_en_de", "test", data_dir=str(tmp_path), reverse=True)
        assert numpy_pairs(graph) == pairs
    assert pairs[0] == ("de test 0", "en test 0")


def test_reversed_run_evaluates_against_reversed_references(tmp_path, monkeypatch):
    """The test BLEU and the dev BLEU of a --reverse run score against the source side."""
    from keras_transformer.decoding import evaluation
    from keras_transformer.runner import Runner

    text = _text(tmp_path, PAIRS)
    cfg = TrainingConfig.from_flat(
        dataset=text, reverse=True, eval_limit=5, model_dir=str(tmp_path)
    )
    runner = Runner(cfg)
    scored = {}
    monkeypatch.setattr(artifacts, "load_trained", lambda *args: (None, None, None))

    def evaluate_bleu(model, tokenizer, pairs, *args, **kwargs):
        scored["test"] = pairs

    monkeypatch.setattr(evaluation, "evaluate_bleu", evaluate_bleu)
    runner.evaluate("unused.weights.h5")
    assert scored["test"] == list(read_pairs(text, "test", limit=5, reverse=True))
    dev_bleu = runner.dev_evaluator()
    dev = list(read_pairs(text, "dev", reverse=True))
    assert (dev_bleu.sources, dev_bleu.references) == ([s for s, _ in dev], [t for _, t in dev])
    test_sources, test_references = zip(*scored["test"])
    for sources in (test_sources, dev_bleu.sources):
        assert sources and all(s.startswith("Satz") for s in sources)  # the target file's
    for references in (test_references, dev_bleu.references):
        assert all(r.startswith("Sentence") for r in references)  # the source file's


def test_model_dir_of_the_other_direction_is_refused(tmp_path: Path):
    cfg = TrainingConfig.from_flat(model_dir=str(tmp_path / "r"))
    os.makedirs(cfg.run.model_dir)
    preflight.save_run_config(cfg)
    preflight.check_same_run(cfg)
    with pytest.raises(ValueError, match="in the other direction: reverse=False there, reverse=Tr"):
        preflight.check_same_run(cfg.replace(reverse=True))
    path = Path(cfg.run.model_dir) / artifacts.RUN_CONFIG_FILE
    saved = json.loads(path.read_text())
    del saved["reverse"], saved["dev_dataset"], saved["test_dataset"]  # a run from before
    path.write_text(json.dumps(saved))
    preflight.check_same_run(cfg)


# Carve-off without leakage ------------------------------------------------------------------


def test_normalized_source_ignores_case_spacing_punctuation_and_nfkc():
    variants = [
        "Open the file.",
        "open  the FILE",
        " OPEN the file!",
        "Ｏｐｅｎ the ﬁle…",
        "open the file",
    ]
    assert {normalize_source(v) for v in variants} == {"open the file"}
    assert normalize_source("Straße, 2 Türen") == "strasse 2 türen"
    assert normalize_source("Open the file 2") != normalize_source("Open the file")


def _near_duplicates(groups: int) -> list[tuple[str, str]]:
    """Each source in five spellings, one of them twice with different targets."""
    pairs = []
    for i in range(groups):
        spellings = [f"Open file {i}.", f"open   FILE {i}", f"OPEN file {i}!", f"Ｏｐｅｎ file {i}"]
        pairs += [(s, f"Öffne Datei {i} ({k})") for k, s in enumerate(spellings)]
        pairs += [(f"Open file {i}.", f"Datei {i} öffnen")]
    return pairs


@pytest.mark.parametrize("form", ["tsv", "text"])
@pytest.mark.parametrize("reverse", [False, True])
def test_carve_off_keeps_near_duplicate_sources_out_of_dev_and_test(tmp_path, form, reverse):
    """Whatever side is the model's source (the file's target with --reverse)."""
    pairs = _near_duplicates(600)
    in_file = [(t, s) for s, t in pairs] if reverse else pairs
    dataset = _tsv(tmp_path / "c.tsv", in_file) if form == "tsv" else _text(tmp_path, in_file)
    splits = {split: list(read_pairs(dataset, split, reverse=reverse)) for split in SPLITS}
    assert sorted(sum(splits.values(), [])) == sorted(pairs)
    groups = {split: {re.search(r"\d+", s)[0] for s, _ in found} for split, found in splits.items()}
    assert groups["dev"] and groups["test"]
    assert not groups["dev"] & groups["train"] and not groups["test"] & groups["train"]
    assert not groups["dev"] & groups["test"]
    assert all(len(splits[split]) == 5 * len(groups[split]) for split in SPLITS)  # whole groups


# End to end ---------------------------------------------------------------------------------


# Slow: a whole training run (41 s on a 2-core CPU) for flags whose parts the default stage
# checks in process (test_file_pair_flags_and_every_field_has_a_flag, the text-file and
# reverse readers above, test_reversed_run_evaluates_against_reversed_references).
@pytest.mark.slow
def test_train_cli_with_separate_files_and_reverse(tmp_path: Path):
    """Train from two files (dev carved off them), test on two other files, backwards."""
    write_tsv(tmp_path / "pairs.tsv", n=124)
    pairs = [line.split("\t") for line in (tmp_path / "pairs.tsv").read_text().splitlines()]
    files = {}
    for name, part in (("train", pairs[4:]), ("held", pairs[:4])):
        for side, suffix in ((0, "en"), (1, "xx")):
            files[name, suffix] = str(
                _write(tmp_path / f"{name}.{suffix}", [p[side] for p in part])
            )
    model_dir = tmp_path / "run"
    command = train_command(tmp_path / "unused.tsv", model_dir, steps=4, every=2)
    command += ["--train-source", files["train", "en"], "--train-target", files["train", "xx"]]
    command += ["--test-source", files["held", "en"], "--test-target", files["held", "xx"]]
    command += ["--reverse", "--eval-limit", "3"]
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = json.loads((model_dir / artifacts.RUN_CONFIG_FILE).read_text())
    assert saved["dataset"] == f"text:{files['train', 'en']},{files['train', 'xx']}"
    assert saved["test_dataset"] == f"text:{files['held', 'en']},{files['held', 'xx']}"
    assert saved["reverse"] is True
    summary = json.loads((model_dir / "summary.json").read_text())
    assert summary["steps"] == 4 and summary["test"]["num_sentences"] == 3
    assert len((model_dir / "test.hyp.txt").read_text().splitlines()) == 3
