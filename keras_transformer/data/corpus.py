"""Parallel text: the bundled sample corpus, TSV files, pairs of text files, WMT'14 from TFDS,
and weighted mixes of these.

Every source yields `(source, target)` string pairs with English as the source, unless
`reverse=True` swaps the two sides (German -> English from the bundled corpus).

Datasets:
    `sample_en_de`, `sample_en_fr`: the bundled LibreOffice help corpus
        (`keras_transformer/data/sample/*.tsv.gz`, see its NOTICE.md).
    `wmt14_en_de`, `wmt14_en_fr`: `tfds.load("wmt14_translate/de-en" | "fr-en")`;
        dev is newstest2013 (TFDS "validation"), test is newstest2014.
    `tsv:PATH`: a `source<TAB>target` file, plain or `.gz`; PATH is the train
        file. If its file name contains `train` and the names with `train`
        replaced by `dev` and by `test` both exist, those are dev and test.
        Otherwise dev and test are carved off PATH itself, by a hash of each line's
        normalized source (`corpus_files`: about 1% each, no dev or test source
        also in train; with at least 3 distinct sources each split gets one), and
        train excludes those lines. With `reverse=True` the target side is the
        source that decides: a reversed run is leak-free too, on other dev and test
        pairs than the forward run's.
    `text:SRC,TGT`: two files (plain or `.gz`), line i of SRC translated by line i
        of TGT. They must have the same number of lines (blank lines at the end do
        not count), else a ValueError naming both files and counts at the call.
        Dev and test: sibling files as for `tsv:` (`train.en,train.de` next to
        `dev.en`, `dev.de`, `test.en`, `test.de`), else carved off as for `tsv:`.
    `SPEC[@WEIGHT]+SPEC[@WEIGHT]...`: a weighted mix of the above for training
        (`mixture`: corpus i gives `round(weight_i * n_i)` pairs per epoch, evenly
        interleaved, one INFO line with the shares); dev and test are the first
        corpus's.

Split `"all"` reads a `tsv:` or `text:` file whole, without carving (how an explicitly given
dev or test file is read, see `DataConfig.split_dataset`).

Bad lines are skipped and counted, never fatal: empty lines or sides, lines
without exactly one tab (a second tab makes the pair ambiguous), invalid UTF-8,
and pairs with a side longer than `max_chars` characters (after stripping
surrounding whitespace). One INFO line with the counts is logged to the
`keras_transformer` logger when a read finishes.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import tensorflow as tf

from keras_transformer.config import DataConfig
from keras_transformer.data import corpus_files as files
from keras_transformer.data import mixture
from keras_transformer.data import prepared_manifest as manifests
from keras_transformer.data.corpus_files import TEXT_PREFIX

DATASETS = ("sample_en_de", "sample_en_fr", "wmt14_en_de", "wmt14_en_fr")
SPLITS = files.SPLITS  # ("train", "dev", "test")
ALL = "all"  # a whole tsv:/text: file
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
_STARTS = (TSV_PREFIX, TEXT_PREFIX, *DATASETS)  # what may follow a `+` of a mix

logger = logging.getLogger("keras_transformer")
Pair = tuple[str, str]


@dataclass
class CorpusStats:
    """Counts of one read. `read` = kept + all skipped counts.

    `skipped_no_tab` counts lines without exactly one tab (none, or two or more). A `text:`
    read counts line pairs; a mix's counts are those of one read of each of its corpora.
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

    def add(self, other: CorpusStats) -> None:
        """Add `other`'s counts to these."""
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def read_pairs(
    dataset: str,
    split: str,
    *,
    data_dir: str | None = None,
    limit: int | None = None,
    max_chars: int = 1000,
    stats: CorpusStats | None = None,
    reverse: bool = False,
) -> Iterator[Pair]:
    """Yields the `(source, target)` pairs of one split.

    Arguments are checked here, before the first pair is read, so a bad name or two `text:`
    files of different lengths raise at the call, not at the first `next()`.

    Args:
        dataset: one of `DATASETS`, `"tsv:PATH"`, `"text:SRC,TGT"` or a mix of them.
        split: `"train"`, `"dev"`, `"test"`, or `"all"` (a whole `tsv:`/`text:` file).
        data_dir: TFDS data directory for the `wmt14_*` datasets; ignored otherwise.
        limit: stop after this many kept pairs (`None`: all).
        max_chars: skip a pair when either side has more characters than this.
        stats: if given, filled in with the counts while reading.
        reverse: yield `(target, source)`: translate the other way.

    `prepared:DIR` reads the text of the corpus DIR was prepared from (`data.prepared`).
    """
    dataset = _text_of(dataset)
    _check_split(split, dataset)
    _check_positive("max_chars", max_chars)
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be None or >= 0. Received: limit={limit}")
    stats = CorpusStats() if stats is None else stats
    parts = mixture.parse_mix(dataset, _STARTS)
    if parts is None:
        raw = _raw_pairs(dataset, split, data_dir, reverse)
        pairs = _clean_pairs(raw, dataset, split, limit, max_chars, stats)
    elif split != "train":
        first = parts[0].dataset
        kwargs = dict(data_dir=data_dir, limit=limit, max_chars=max_chars, stats=stats)
        return read_pairs(first, split, reverse=reverse, **kwargs)
    else:
        for part in parts:
            _raw_pairs(part.dataset, split, data_dir)  # raise now on a bad corpus
        pairs = itertools.islice(_mix_pairs(parts, data_dir, max_chars, stats, reverse), limit)
    return ((target, source) for source, target in pairs) if reverse else pairs


_GENERATOR_CHUNK = 1024  # pairs per from_generator element (load_corpus)


def load_corpus(
    dataset: str,
    split: str,
    *,
    data_dir: str | None = None,
    max_chars: int = 1000,
    reverse: bool = False,
) -> tf.data.Dataset:
    """A `tf.data.Dataset` of `{"source": tf.string, "target": tf.string}` scalars.

    Same pairs, in the same order, as `read_pairs`. For `wmt14_*` it is a TFDS
    pipeline with the cleaning done in-graph; otherwise it wraps `read_pairs`.
    """
    dataset = _text_of(dataset)
    _check_split(split, dataset)
    _check_positive("max_chars", max_chars)
    if dataset in _TFDS_NAMES:
        return _tfds_dataset(dataset, split, data_dir, max_chars, reverse)
    read_pairs(dataset, split, max_chars=max_chars)  # raise now on a bad name, not in tf.data

    def generate() -> Iterator[dict[str, list[str]]]:
        pairs = read_pairs(dataset, split, data_dir=data_dir, max_chars=max_chars, reverse=reverse)
        while chunk := list(itertools.islice(pairs, _GENERATOR_CHUNK)):
            yield {"source": [s for s, _ in chunk], "target": [t for _, t in chunk]}

    # Chunks, unbatched in C++: every element from_generator yields is a Python call
    # (benchmarks/results/2026-11-25-benchmarks-history.md, "load_corpus yields chunks").
    spec = tf.TensorSpec(shape=(None,), dtype=tf.string)
    chunks = tf.data.Dataset.from_generator(
        generate, output_signature={"source": spec, "target": spec}
    )
    return chunks.unbatch()  # {"source": (), "target": ()} string scalars


def read_split(cfg: DataConfig, split: str, **kwargs) -> Iterator[Pair]:
    """`read_pairs` of a training run's split: `cfg.split_dataset(split)` read with the run's
    `data_dir` and `reverse` (`cfg`: its `TrainingConfig.data`); `kwargs` (`limit`, `stats`,
    `max_chars`) go to `read_pairs`."""
    dataset, part = cfg.split_dataset(split)
    return read_pairs(dataset, part, data_dir=cfg.data_dir, reverse=cfg.reverse, **kwargs)


def load_split(cfg: DataConfig, split: str) -> tf.data.Dataset:
    """`load_corpus` of a training run's split (see `read_split`)."""
    dataset, part = cfg.split_dataset(split)
    return load_corpus(dataset, part, data_dir=cfg.data_dir, reverse=cfg.reverse)


def mix_parts(dataset: str) -> list[mixture.MixPart]:
    """The corpora of a dataset string: its mix's, or itself with weight 1."""
    return mixture.parse_mix(dataset, _STARTS) or [mixture.MixPart(dataset)]


def uses_tfds(dataset: str) -> bool:
    """Whether a corpus of `dataset` (a mix too) comes from TFDS (WMT: millions of pairs)."""
    return any(part.dataset in _TFDS_NAMES for part in mix_parts(dataset))


def sample_path(dataset: str, split: str) -> Path:
    """The bundled gzip TSV file of a `sample_*` dataset."""
    _check_split(split, dataset)
    if not dataset.startswith("sample_") or dataset not in DATASETS:
        raise ValueError(_unknown_dataset(dataset))
    return SAMPLE_DIR / f"{dataset.removeprefix('sample_')}.{split}.tsv.gz"


def carve_keys(path: Path, reverse: bool = False) -> tuple[frozenset[bytes], frozenset[bytes]]:
    """The keys of the sources (the targets if `reverse`) a TSV file's dev and test are carved
    from (`corpus_files.carve_keys`)."""
    side = int(reverse)
    return files.carve_keys(_tsv_side(line, side) for line in files.read_lines(path))


def _text_of(dataset: str) -> str:
    """The text corpus of `dataset`: itself, or the one a `prepared:DIR` was prepared from."""
    return manifests.load(dataset).dataset if manifests.is_prepared(dataset) else dataset


def _check_split(split: str, dataset: str) -> None:
    if split not in (*SPLITS, ALL):
        raise ValueError(f"split must be one of {(*SPLITS, ALL)}. Received: split={split!r}")
    if split == ALL and not dataset.startswith((TSV_PREFIX, TEXT_PREFIX)):
        raise ValueError(
            "split='all' reads a whole tsv:PATH or text:SRC,TGT file. "
            f"Received: dataset={dataset!r}"
        )


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer. Received: {name}={value!r}")


def _unknown_dataset(dataset: str) -> str:
    return (
        f"Unknown dataset. Valid choices: {', '.join(DATASETS)}, 'tsv:PATH', "
        f"'text:SRC,TGT' or a mix 'SPEC@WEIGHT+SPEC@WEIGHT'. Received: dataset={dataset!r}"
    )


def _raw_pairs(dataset: str, split: str, data_dir: str | None, reverse: bool = False) -> Iterable:
    """Checks the name; the (lazy) raw TSV lines or `(source, target)` bytes of one corpus. A
    carve-off goes by the side that is the model's source: the target side if `reverse`."""
    side = int(reverse)
    if dataset in _TFDS_NAMES:
        return _tfds_raw_pairs(dataset, split, data_dir)
    if dataset.startswith(TEXT_PREFIX):
        return _text_raw_pairs(dataset, split, side)
    if dataset.startswith(TSV_PREFIX):
        path = Path(dataset.removeprefix(TSV_PREFIX))
        if not path.is_file():
            raise ValueError(f"TSV file not found. Received: dataset={dataset!r}")
        siblings = files.split_files(path)
        if split == ALL or siblings is not None:
            return files.read_lines(path if split == ALL else siblings[split])
        return _carved(lambda: files.read_lines(path), lambda line: _tsv_side(line, side), split)
    path = sample_path(dataset, split)
    if not path.is_file():
        raise ValueError(f"Bundled corpus file is missing: {path}. Received: dataset={dataset!r}")
    return files.read_lines(path)


def _text_raw_pairs(dataset: str, split: str, side: int) -> Iterable[tuple[bytes, bytes]]:
    source, target = files.parse_text_dataset(dataset)
    siblings = files.text_split_files(source, target)
    if split != ALL and siblings is not None:
        source, target = siblings[split]
    files.check_aligned(source, target)
    if split == ALL or siblings is not None:
        return _zip_lines(source, target)
    return _carved(lambda: _zip_lines(source, target), lambda pair: pair[side], split)


def _zip_lines(source: Path, target: Path) -> Iterator[tuple[bytes, bytes]]:
    with files.open_binary(source) as sources, files.open_binary(target) as targets:
        yield from itertools.zip_longest(sources, targets, fillvalue=b"")


def _carved(read: Callable[[], Iterable], source_of: Callable, split: str) -> Iterator:
    """The items of `read()` whose source (`source_of(item)`) is carved to `split`."""
    dev_keys, test_keys = files.carve_keys(map(source_of, read()))
    for item in read():
        if files.carve_split(source_of(item), dev_keys, test_keys) == split:
            yield item


def _tsv_side(line: bytes, side: int) -> bytes | None:
    """Side 0 (source) or 1 (target) of a TSV line; None for a line that is no pair (no split
    of its own)."""
    fields = _split_line(line)
    return fields[side] if fields is not None else None


def _split_line(line: bytes) -> tuple[bytes, bytes] | None:
    """`(source, target)` bytes of a TSV line, or None without exactly one tab."""
    fields = line.rstrip(b"\r\n").split(b"\t")
    return (fields[0], fields[1]) if len(fields) == 2 else None


def _mix_pairs(
    parts: list[mixture.MixPart],
    data_dir: str | None,
    max_chars: int,
    stats: CorpusStats,
    reverse: bool,
) -> Iterator[Pair]:
    """One epoch of a mix (`mixture`), sides not yet swapped; `stats` gets the counts of one
    read of each corpus."""
    sizes = []
    for part in parts:
        part_stats = CorpusStats()
        raw = _raw_pairs(part.dataset, "train", data_dir, reverse)
        pairs = _clean_pairs(raw, part.dataset, "train", None, max_chars, part_stats)
        sizes.append(sum(1 for _ in pairs))
        stats.add(part_stats)
    names = "+".join(part.dataset for part in parts)
    logger.info("corpus %s/train: %s", names, mixture.describe(parts, sizes))

    def read(dataset: str) -> Iterator[Pair]:
        raw = _raw_pairs(dataset, "train", data_dir, reverse)
        return _clean_pairs(raw, dataset, "train", None, max_chars, CorpusStats(), log=False)

    yield from mixture.mixed_pairs(parts, sizes, read)


def _clean_pairs(
    raw: Iterable[bytes | tuple[bytes, bytes]],
    dataset: str,
    split: str,
    limit: int | None,
    max_chars: int,
    stats: CorpusStats,
    log: bool = True,
) -> Iterator[Pair]:
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
    if log:
        logger.info("corpus %s/%s: %s", dataset, split, stats.log_line())


def _check_pair(
    item: bytes | tuple[bytes, bytes], max_chars: int, stats: CorpusStats
) -> Pair | None:
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
    dataset: str, split: str, data_dir: str | None, max_chars: int, reverse: bool
) -> tf.data.Dataset:
    """The TFDS split as `{"source", "target"}`, empties and over-long pairs removed in-graph."""
    _, target = _TFDS_NAMES[dataset]
    source, target = (target, "en") if reverse else ("en", target)

    def to_pair(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return {
            "source": tf.strings.strip(example[source]),
            "target": tf.strings.strip(example[target]),
        }

    def keep(pair: dict[str, tf.Tensor]) -> tf.Tensor:
        lengths = [tf.strings.length(side, unit="UTF8_CHAR") for side in pair.values()]
        non_empty = tf.logical_and(lengths[0] > 0, lengths[1] > 0)
        short = tf.logical_and(lengths[0] <= max_chars, lengths[1] <= max_chars)
        return tf.logical_and(non_empty, short)

    ds = _tfds_load(dataset, split, data_dir)
    return ds.map(to_pair, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).filter(keep)
