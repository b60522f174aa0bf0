"""Tests for keras_transformer.data.corpus: bundled corpus, TSV reader, WMT via mocked TFDS."""

from __future__ import annotations

import gzip
import logging
import re
from pathlib import Path

import pytest
import tensorflow as tf

from keras_transformer.data import corpus
from keras_transformer.data.corpus import (
    DATASETS,
    SPLITS,
    CorpusStats,
    carve_keys,
    load_corpus,
    read_pairs,
    sample_path,
)
from keras_transformer.testing.corpora import numpy_pairs, split_tagged_dataset

# (minimum pairs) per bundled split; the real counts are in sample/NOTICE.md's run.
MIN_SAMPLE_PAIRS = {"train": 20_000, "dev": 300, "test": 800}

BAD_TSV = [
    b"hello\tHallo\n",
    b"\n",  # empty line
    b"   \t  \n",  # both sides blank
    b"no tab here\n",
    b"one\ttwo\tthree\n",  # two tabs: ambiguous
    b"bad \xff\xfe utf8\tkaputt\n",
    b"short\t" + b"y" * 11 + b"\n",  # target over max_chars=10
    b"  good two \tgut zwei\r\n",  # CRLF and padding are stripped
    b"\tonly target\n",  # empty source
    b"last\tletzte",  # no final newline
]
GOOD_PAIRS = [("hello", "Hallo"), ("good two", "gut zwei"), ("last", "letzte")]
BAD_STATS = CorpusStats(
    read=10,
    kept=3,
    skipped_empty=3,
    skipped_no_tab=2,
    skipped_bad_utf8=1,
    skipped_too_long=1,
)


def _write(path: Path, lines: list[bytes]) -> Path:
    data = b"".join(lines)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def _with_siblings(tmp_path: Path, name: str, train_lines: list[bytes]) -> Path:
    """Writes NAME (containing 'train') plus its dev/test siblings."""
    _write(tmp_path / name.replace("train", "dev"), [b"dev source\tdev target\n"])
    _write(tmp_path / name.replace("train", "test"), [b"test source\ttest target\n"])
    return _write(tmp_path / name, train_lines)


@pytest.mark.parametrize("dataset", ["sample_en_de", "sample_en_fr"])
def test_bundled_splits_are_clean_non_trivial_and_disjoint(dataset: str) -> None:
    sources = {}
    for split in SPLITS:
        stats = CorpusStats()
        pairs = list(read_pairs(dataset, split, stats=stats))
        assert len(pairs) >= MIN_SAMPLE_PAIRS[split], (split, len(pairs))
        assert stats == CorpusStats(read=len(pairs), kept=len(pairs))  # nothing skipped
        assert not any("\t" in side or "\n" in side for pair in pairs for side in pair)
        assert all(source != target for source, target in pairs)
        assert len(set(pairs)) == len(pairs)  # exact duplicates were removed
        sources[split] = {source for source, _ in pairs}
    assert not sources["train"] & sources["dev"]
    assert not sources["train"] & sources["test"]
    assert not sources["dev"] & sources["test"]


def test_bundled_files_and_notice_exist() -> None:
    for dataset in ("sample_en_de", "sample_en_fr"):
        for split in SPLITS:
            assert sample_path(dataset, split).is_file()
    notice = (sample_path("sample_en_de", "train").parent / "NOTICE.md").read_text()
    assert "https://mozilla.org/MPL/2.0/" in notice
    assert "libreoffice-help-de" in notice and "libreoffice-help-fr" in notice


@pytest.mark.parametrize("dataset", ["sample_en_de", "sample_en_fr"])
def test_bundled_tagged_dev_set_is_dev_text_with_inline_tags(dataset: str) -> None:
    from keras_transformer.data.tagged_corpus import strip_tags

    path = sample_path(dataset, "train").parent / f"{dataset[7:]}.dev.tagged.tsv.gz"
    rows = [
        line.split("\t") for line in gzip.open(path, "rt", encoding="utf-8").read().splitlines()
    ]
    assert len(rows) > 100 and all(len(row) == 2 and row[1].strip() for row in rows)
    assert all(re.search(r"<[a-z]+[ >]", source) for source, _ in rows)  # an inline tag each
    texts = [strip_tags(source) for source, _ in rows]
    train = {source for source, _ in read_pairs(dataset, "train")}
    dev = {source for source, _ in read_pairs(dataset, "dev")}
    assert not train & set(texts)  # kept apart from training
    assert sum(text in dev for text in texts) >= 0.95 * len(texts)  # the dev pages' paragraphs


@pytest.mark.parametrize("name", ["bad.train.tsv", "bad.train.tsv.gz"])
def test_tsv_reader_skips_and_counts_bad_lines(
    tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = _with_siblings(tmp_path, name, BAD_TSV)
    stats = CorpusStats()
    with caplog.at_level(logging.INFO, logger="keras_transformer"):
        pairs = list(read_pairs(f"tsv:{path}", "train", max_chars=10, stats=stats))
    assert pairs == GOOD_PAIRS
    assert stats == BAD_STATS
    assert [r.getMessage() for r in caplog.records if r.name == "keras_transformer"] == [
        f"corpus tsv:{path}/train: {BAD_STATS.log_line()}"
    ]


def test_log_line_names_every_count() -> None:
    line = BAD_STATS.log_line()
    assert line == (
        "read=10 kept=3 skipped_empty=3 skipped_no_tab=2 skipped_bad_utf8=1 skipped_too_long=1"
    )


def test_limit_stops_after_kept_pairs(tmp_path: Path) -> None:
    path = _with_siblings(tmp_path, "x.train.tsv", BAD_TSV)
    assert list(read_pairs(f"tsv:{path}", "train", max_chars=10, limit=2)) == GOOD_PAIRS[:2]
    assert list(read_pairs(f"tsv:{path}", "train", limit=0)) == []


def test_tsv_sibling_files_are_used_for_dev_and_test(tmp_path: Path) -> None:
    path = _with_siblings(tmp_path, "corpus_train.tsv", [b"a\tb\n"] * 50)
    assert list(read_pairs(f"tsv:{path}", "train")) == [("a", "b")] * 50
    assert list(read_pairs(f"tsv:{path}", "dev")) == [("dev source", "dev target")]
    assert list(read_pairs(f"tsv:{path}", "test")) == [("test source", "test target")]


def test_tsv_carve_off_is_reproducible_disjoint_and_complete(tmp_path: Path) -> None:
    lines = [f"source {i}\ttarget {i}\n".encode() for i in range(1000)]
    path = _write(tmp_path / "corpus.tsv.gz", lines)  # no 'train' in the name: carve
    splits = {split: list(read_pairs(f"tsv:{path}", split)) for split in SPLITS}
    assert splits == {split: list(read_pairs(f"tsv:{path}", split)) for split in SPLITS}
    assert 1 <= len(splits["dev"]) <= 30 and 1 <= len(splits["test"]) <= 30
    assert sum(len(pairs) for pairs in splits.values()) == 1000
    as_sets = {split: set(pairs) for split, pairs in splits.items()}
    assert as_sets["train"] | as_sets["dev"] | as_sets["test"] == {
        (f"source {i}", f"target {i}") for i in range(1000)
    }
    assert not as_sets["dev"] & as_sets["train"] and not as_sets["test"] & as_sets["train"]


def test_tsv_carve_off_gives_each_split_a_line_from_three(tmp_path: Path) -> None:
    path = _write(tmp_path / "tiny.tsv", [b"a\t1\n", b"b\t2\n", b"\n", b"c\t3\n"])
    splits = {split: list(read_pairs(f"tsv:{path}", split)) for split in SPLITS}
    assert [len(splits[split]) for split in SPLITS] == [1, 1, 1]
    assert sorted(sum(splits.values(), [])) == [("a", "1"), ("b", "2"), ("c", "3")]
    dev_keys, test_keys = carve_keys(path)
    assert len(dev_keys) == len(test_keys) == 1 and dev_keys != test_keys


def test_tsv_without_dev_sibling_is_carved(tmp_path: Path) -> None:
    lines = [f"s{i}\tt{i}\n".encode() for i in range(300)]
    path = _write(tmp_path / "only.train.tsv", lines)
    _write(tmp_path / "only.test.tsv", [b"x\ty\n"])  # dev missing: carve both
    assert ("x", "y") not in list(read_pairs(f"tsv:{path}", "test"))
    assert len(list(read_pairs(f"tsv:{path}", "train"))) < 300


@pytest.mark.parametrize("split", ["valid", "validation", "TRAIN", ""])
def test_bad_split_raises_naming_it(split: str) -> None:
    with pytest.raises(ValueError, match=f"split={split!r}"):
        read_pairs("sample_en_de", split)
    with pytest.raises(ValueError, match=f"split={split!r}"):
        load_corpus("sample_en_de", split)


@pytest.mark.parametrize("dataset", ["wmt15_en_de", "sample_de_en", "", "tsv"])
def test_unknown_dataset_raises_listing_choices(dataset: str) -> None:
    for call in (read_pairs, load_corpus):
        with pytest.raises(ValueError, match=f"dataset={dataset!r}") as error:
            call(dataset, "train")
        assert all(name in str(error.value) for name in DATASETS)


def test_missing_tsv_file_raises_naming_it(tmp_path: Path) -> None:
    dataset = f"tsv:{tmp_path / 'absent.tsv'}"
    with pytest.raises(ValueError, match="absent.tsv"):
        read_pairs(dataset, "train")


def test_bad_max_chars_and_limit_raise() -> None:
    with pytest.raises(ValueError, match="max_chars=0"):
        read_pairs("sample_en_de", "dev", max_chars=0)
    with pytest.raises(ValueError, match="limit=-1"):
        read_pairs("sample_en_de", "dev", limit=-1)


@pytest.mark.parametrize("chunk", [1024, 7])  # 609 dev pairs: one chunk; 87 and a partial one
def test_load_corpus_matches_read_pairs(tmp_path: Path, monkeypatch, chunk: int) -> None:
    monkeypatch.setattr(corpus, "_GENERATOR_CHUNK", chunk)
    ds = load_corpus("sample_en_de", "dev")
    assert ds.element_spec == {
        "source": tf.TensorSpec((), tf.string),
        "target": tf.TensorSpec((), tf.string),
    }
    assert numpy_pairs(ds) == list(read_pairs("sample_en_de", "dev"))
    path = _with_siblings(tmp_path, "bad.train.tsv", BAD_TSV)
    assert numpy_pairs(load_corpus(f"tsv:{path}", "train", max_chars=10)) == GOOD_PAIRS


# --- WMT'14 through TFDS, without network (tfds.testing.mock_data) ------------------


@pytest.mark.parametrize(
    ("dataset", "split", "target", "tfds_split"),
    [
        ("wmt14_en_de", "train", "de", "train"),
        ("wmt14_en_de", "dev", "de", "validation"),
        ("wmt14_en_fr", "test", "fr", "test"),
    ],
)
def test_wmt_maps_english_to_source_and_splits(
    tmp_path: Path, dataset: str, split: str, target: str, tfds_split: str
) -> None:
    tfds = pytest.importorskip("tensorflow_datasets")
    expected = [(f"en {tfds_split} {i}", f"{target} {tfds_split} {i}") for i in range(3)]
    with tfds.testing.mock_data(as_dataset_fn=split_tagged_dataset):
        stats = CorpusStats()
        pairs = list(read_pairs(dataset, split, data_dir=str(tmp_path), max_chars=20, stats=stats))
        ds = load_corpus(dataset, split, data_dir=str(tmp_path), max_chars=20)
        assert numpy_pairs(ds) == expected
    assert pairs == expected
    assert stats == CorpusStats(read=5, kept=3, skipped_empty=1, skipped_too_long=1)


def test_wmt_random_mock_data_matches_tfds_features(tmp_path: Path) -> None:
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=6):
        raw = tfds.as_numpy(tfds.load("wmt14_translate/de-en", split="validation"))
        expected = [(x["en"].decode().strip(), x["de"].decode().strip()) for x in raw]
        expected = [pair for pair in expected if all(pair)]
        pairs = list(read_pairs("wmt14_en_de", "dev", data_dir=str(tmp_path)))
        from_ds = numpy_pairs(load_corpus("wmt14_en_de", "dev", data_dir=str(tmp_path)))
    assert expected and pairs == expected and from_ds == expected


def _write_wmt_sources(builder, root: Path) -> None:
    """Small files laid out as the WMT archives unpack: each sub-corpus' relative paths under
    `root`, sentences `"<sub-corpus> <language> <i>"` (SGML for the newstest sets)."""
    from tensorflow_datasets.translate import wmt

    source = builder.builder_config.language_pair[0]
    for names in builder.subsets.values():
        for name in names:
            for relative in wmt.DATASET_MAP[name].get_path(source):
                path = root / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                language = "en" if ".en" in path.name else source
                lines = [f"{name} {language} {i}" for i in range(3)]
                if path.suffix == ".sgm":
                    lines = [f'<seg id="{i}">{line}</seg>' for i, line in enumerate(lines)]
                path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_wmt14_real_builder_prepares_from_local_sources(tmp_path: Path, monkeypatch) -> None:
    """The path of `--dataset wmt14_en_de` on a fresh install, without network: TFDS' real
    `wmt14_translate` builder, its real download manager (whose construction reads the
    builder's checksums through `importlib_resources`, a dependency TFDS does not declare on
    Python >= 3.9), split generators, shard writer and reader, then our `read_pairs`. Only
    `download_and_extract` is replaced: it serves local files laid out as the WMT archives."""
    tfds = pytest.importorskip("tensorflow_datasets")
    data_dir, sources = tmp_path / "tfds", tmp_path / "extracted"
    builder = tfds.builder("wmt14_translate/de-en", data_dir=str(data_dir))
    _write_wmt_sources(builder, sources)
    urls = []

    def serve_local(url: str) -> str:
        urls.append(url)
        return str(sources)

    def download_and_extract(self, url_or_urls):
        del self
        return tfds.core.utils.map_nested(serve_local, url_or_urls)

    monkeypatch.setattr(tfds.download.DownloadManager, "download_and_extract", download_and_extract)
    config = tfds.download.DownloadConfig(try_download_gcs=False)
    builder.download_and_prepare(download_config=config)
    assert urls and all(url.startswith("http") for url in urls)  # the real download list
    assert {split: info.num_examples for split, info in builder.info.splits.items()} == {
        "train": 9,  # europarl_v7, commoncrawl, newscommentary_v9: 3 pairs each
        "validation": 3,  # newstest2013
        "test": 3,  # newstest2014 (SGML)
    }
    pairs = read_pairs("wmt14_en_de", "test", data_dir=str(data_dir))
    assert sorted(pairs) == [(f"newstest2014 en {i}", f"newstest2014 de {i}") for i in range(3)]
