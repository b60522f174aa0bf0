"""Parallel text: the bundled sample corpus, TSV files and WMT'14 from TFDS.

Every source yields `(source, target)` string pairs with English as the source.

Datasets:
    `sample_en_de`, `sample_en_fr`: the bundled LibreOffice help corpus
        (`keras_transformer/data/sample/*.tsv.gz`, see its NOTICE.md).
    `wmt14_en_de`, `wmt14_en_fr`: `tfds.load("wmt14_translate/de-en" | "fr-en")`;
        dev is newstest2013 (TFDS "validation"), test is newstest2014.
    `tsv:PATH`: a `source<TAB>target` file, plain or `.gz`; PATH is the train
        file. If its file name contains `train` and the names with `train`
        replaced by `dev` and by `test` both exist, those are dev and test.
        Otherwise dev and test are carved off PATH itself: a line goes to dev or
        test by a hash of its bytes (about 1% each; with at least 3 non-empty
        lines each split gets at least one), and train excludes those lines.

Bad lines are skipped and counted, never fatal: empty lines or sides, lines
without exactly one tab (a second tab makes the pair ambiguous), invalid UTF-8,
and pairs with a side longer than `max_chars` characters (after stripping
surrounding whitespace). One INFO line with the counts is logged to the
`keras_transformer` logger when a read finishes.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import tensorflow as tf

DATASETS = ("sample_en_de", "sample_en_fr", "wmt14_en_de", "wmt14_en_fr")
SPLITS = ("train", "dev", "test")
TSV_PREFIX = "tsv:"
SAMPLE_DIR = Path(__file__).resolve().parent / "sample"

# dataset -> (TFDS name, target language feature); the source feature is "en".
_TFDS_NAMES = {
    "wmt14_en_de": ("wmt14_translate/de-en", "de"),
    "wmt14_en_fr": ("wmt14_translate/fr-en", "fr"),
}
_TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
# ASCII whitespace only, as `tf.strings.strip` does, so both WMT paths agree.
_SPACE = " \t\n\r\f\v"
_CARVE_BUCKETS = 100  # hash bucket 0 -> dev, 1 -> test, the rest -> train

logger = logging.getLogger("keras_transformer")


@dataclass
class CorpusStats:
    """Counts of one read. `read` = kept + all skipped counts.

    `skipped_no_tab` counts lines without exactly one tab (none, or two or more).
    """

    read: int = 0
    kept: int = 0
    skipped_empty: int = 0
    skipped_no_tab: int = 0
    skipped_bad_utf8: int = 0
    skipped_too_long: int = 0

    def log_line(self) -> str:
        """The counts as one `name=value` line."""
        return " ".join(f"{name}={value}" for name, value in vars(self).items())


def read_pairs(
    dataset: str,
    split: str,
    *,
    data_dir: str | None = None,
    limit: int | None = None,
    max_chars: int = 1000,
    stats: CorpusStats | None = None,
) -> Iterator[tuple[str, str]]:
    """Yields the `(source, target)` pairs of one split.

    Arguments are checked here, before the first pair is read, so a bad name
    raises at the call, not at the first `next()`.

    Args:
        dataset: one of `DATASETS`, or `"tsv:PATH"`.
        split: `"train"`, `"dev"` or `"test"`.
        data_dir: TFDS data directory for the `wmt14_*` datasets; ignored otherwise.
        limit: stop after this many kept pairs (`None`: all).
        max_chars: skip a pair when either side has more characters than this.
        stats: if given, filled in with the counts while reading.
    """
    _check_split(split)
    _check_positive("max_chars", max_chars)
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be None or >= 0. Received: limit={limit}")
    stats = CorpusStats() if stats is None else stats
    if dataset in _TFDS_NAMES:
        raw = _tfds_raw_pairs(dataset, split, data_dir)
    else:
        raw = _file_raw_pairs(dataset, split)
    return _clean_pairs(raw, f"{dataset}/{split}", limit, max_chars, stats)


def load_corpus(
    dataset: str, split: str, *, data_dir: str | None = None, max_chars: int = 1000
) -> tf.data.Dataset:
    """A `tf.data.Dataset` of `{"source": tf.string, "target": tf.string}` scalars.

    Same pairs, in the same order, as `read_pairs`. For `wmt14_*` it is a TFDS
    pipeline with the cleaning done in-graph; otherwise it wraps `read_pairs`.
    """
    _check_split(split)
    _check_positive("max_chars", max_chars)
    if dataset in _TFDS_NAMES:
        return _tfds_dataset(dataset, split, data_dir, max_chars)
    _file_raw_pairs(dataset, split)  # raise now on a bad name, not inside tf.data

    def generate() -> Iterator[dict[str, str]]:
        for source, target in read_pairs(dataset, split, max_chars=max_chars):
            yield {"source": source, "target": target}

    spec = tf.TensorSpec(shape=(), dtype=tf.string)
    return tf.data.Dataset.from_generator(
        generate, output_signature={"source": spec, "target": spec}
    )


def sample_path(dataset: str, split: str) -> Path:
    """The bundled gzip TSV file of a `sample_*` dataset."""
    _check_split(split)
    if not dataset.startswith("sample_") or dataset not in DATASETS:
        raise ValueError(_unknown_dataset(dataset))
    return SAMPLE_DIR / f"{dataset.removeprefix('sample_')}.{split}.tsv.gz"


def tsv_split_files(path: str | Path) -> dict[str, Path] | None:
    """`{"train", "dev", "test"} -> file` when PATH has dev/test siblings, else None."""
    path = Path(path)
    if "train" not in path.name:
        return None
    head, _, tail = path.name.rpartition("train")
    files = {split: path.with_name(f"{head}{split}{tail}") for split in SPLITS}
    if files["dev"].is_file() and files["test"].is_file():
        return files
    return None


def carve_split(line: bytes, dev_keys: frozenset[bytes], test_keys: frozenset[bytes]) -> str:
    """The split a line of a carved TSV file belongs to (see `carve_keys`)."""
    key = _line_key(line)
    if key in dev_keys:
        return "dev"
    if key in test_keys:
        return "test"
    return "train"


def carve_keys(path: Path) -> tuple[frozenset[bytes], frozenset[bytes]]:
    """The hash keys of the lines carved off `path` for dev and for test.

    A line's key is a hash of its bytes (line ending and surrounding whitespace
    stripped), so identical lines always land in the same split. Buckets of the
    key give about 1% each; if a split came out empty and the file has at least 3
    non-empty lines, the smallest remaining train keys are moved into it.
    """
    dev, test, smallest_train = set(), set(), []
    lines = 0
    with _open_binary(path) as handle:
        for raw in handle:
            if not raw.strip():
                continue
            lines += 1
            key = _line_key(raw)
            bucket = int.from_bytes(key, "big") % _CARVE_BUCKETS
            if bucket < 2:
                (dev if bucket == 0 else test).add(key)
            elif key not in smallest_train:
                smallest_train = sorted([*smallest_train, key])[:2]
    if lines >= 3:
        for keys in (dev, test):
            if not keys and smallest_train:
                keys.add(smallest_train.pop(0))
    return frozenset(dev), frozenset(test)


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}. Received: split={split!r}")


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer. Received: {name}={value!r}")


def _unknown_dataset(dataset: str) -> str:
    return (
        f"Unknown dataset. Valid choices: {', '.join(DATASETS)} or 'tsv:PATH'. "
        f"Received: dataset={dataset!r}"
    )


def _line_key(line: bytes) -> bytes:
    return hashlib.blake2b(line.strip(), digest_size=8).digest()


def _open_binary(path: Path) -> BinaryIO:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _file_raw_pairs(dataset: str, split: str) -> Iterator[bytes]:
    """Checks the name and returns the (lazy) raw lines of a sample or TSV split."""
    if dataset.startswith(TSV_PREFIX):
        path = Path(dataset.removeprefix(TSV_PREFIX))
        if not path.is_file():
            raise ValueError(f"TSV file not found. Received: dataset={dataset!r}")
        siblings = tsv_split_files(path)
        if siblings is not None:
            return _read_lines(siblings[split])
        return _carved_lines(path, split)
    path = sample_path(dataset, split)
    if not path.is_file():
        raise ValueError(f"Bundled corpus file is missing: {path}. Received: dataset={dataset!r}")
    return _read_lines(path)


def _read_lines(path: Path) -> Iterator[bytes]:
    with _open_binary(path) as handle:
        yield from handle


def _carved_lines(path: Path, split: str) -> Iterator[bytes]:
    dev_keys, test_keys = carve_keys(path)
    for line in _read_lines(path):
        # Empty lines have no split of their own: train reads (and counts) them.
        wanted = carve_split(line, dev_keys, test_keys) if line.strip() else "train"
        if wanted == split:
            yield line


def _split_line(line: bytes) -> tuple[bytes, bytes] | None:
    """`(source, target)` bytes of a TSV line, or None without exactly one tab."""
    fields = line.rstrip(b"\r\n").split(b"\t")
    return (fields[0], fields[1]) if len(fields) == 2 else None


def _clean_pairs(
    raw: Iterable[bytes | tuple[bytes, bytes]],
    name: str,
    limit: int | None,
    max_chars: int,
    stats: CorpusStats,
) -> Iterator[tuple[str, str]]:
    """Validates raw TSV lines or raw `(source, target)` bytes; counts what it skips."""
    kept = 0
    for item in raw:
        if limit is not None and kept >= limit:
            break
        stats.read += 1
        pair = _check_pair(item, max_chars, stats)
        if pair is not None:
            kept += 1
            stats.kept += 1
            yield pair
    logger.info("corpus %s: %s", name, stats.log_line())


def _check_pair(
    item: bytes | tuple[bytes, bytes], max_chars: int, stats: CorpusStats
) -> tuple[str, str] | None:
    if isinstance(item, bytes):
        if not item.strip():
            stats.skipped_empty += 1
            return None
        fields = _split_line(item)
        if fields is None:
            stats.skipped_no_tab += 1
            return None
        item = fields
    try:
        source, target = (side.decode("utf-8").lstrip("\ufeff").strip(_SPACE) for side in item)
    except UnicodeDecodeError:
        stats.skipped_bad_utf8 += 1
        return None
    if not source or not target:
        stats.skipped_empty += 1
        return None
    if len(source) > max_chars or len(target) > max_chars:
        stats.skipped_too_long += 1
        return None
    return source, target


def _tfds_load(dataset: str, split: str, data_dir: str | None) -> tf.data.Dataset:
    import tensorflow_datasets as tfds  # slow import, only needed for WMT

    name, _ = _TFDS_NAMES[dataset]
    return tfds.load(name, split=_TFDS_SPLITS[split], data_dir=data_dir)


def _tfds_raw_pairs(
    dataset: str, split: str, data_dir: str | None
) -> Iterator[tuple[bytes, bytes]]:
    """Lazily yields raw `(en, target)` bytes from TFDS (nothing loads until iterated)."""
    import tensorflow_datasets as tfds

    _, target = _TFDS_NAMES[dataset]
    for example in tfds.as_numpy(_tfds_load(dataset, split, data_dir)):
        yield example["en"], example[target]


def _tfds_dataset(
    dataset: str, split: str, data_dir: str | None, max_chars: int
) -> tf.data.Dataset:
    """The TFDS split as `{"source", "target"}`, empties and over-long pairs removed in-graph."""
    _, target = _TFDS_NAMES[dataset]

    def to_pair(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {
            "source": tf.strings.strip(example["en"]),
            "target": tf.strings.strip(example[target]),
        }

    def keep(pair: dict[str, tf.Tensor]) -> tf.Tensor:
        lengths = [tf.strings.length(side, unit="UTF8_CHAR") for side in pair.values()]
        non_empty = tf.logical_and(lengths[0] > 0, lengths[1] > 0)
        short = tf.logical_and(lengths[0] <= max_chars, lengths[1] <= max_chars)
        return tf.logical_and(non_empty, short)

    ds = _tfds_load(dataset, split, data_dir)
    return ds.map(to_pair, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).filter(keep)
