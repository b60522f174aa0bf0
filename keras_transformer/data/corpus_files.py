"""Parallel text on disk: plain or gzip files, the `text:SRC,TGT` form (a source file and a
target file, one sentence per line), dev/test sibling files, and the leak-free carve-off of dev
and test from a single train file. No TensorFlow here: `keras_transformer.cli.train` builds its
`--train-source/--train-target` dataset with `text_dataset` before TensorFlow starts.

Carve-off: a pair goes to dev, test or train by a hash of its NORMALIZED source, the side the
model reads (the target side of a reversed run). `normalize_source`: NFKC, casefolded, every
character that is neither a word character nor whitespace removed, whitespace runs collapsed;
"Hello,  World!" and "hello world" are one source. All pairs whose sources normalize alike
share a split, so no dev or test source occurs in train, even as a case, spacing, punctuation
or NFKC variant, and a source repeated with several translations sits in one split with all of
them. About 1% of the distinct normalized sources go to dev and 1% to test. The normalization
errs on the side of merging (it also drops symbols, and combining marks that Python's `re` does
not count as word characters): a merge only makes the split sizes lumpier, it never leaks.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import re
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

TEXT_PREFIX = "text:"
SPLITS = ("train", "dev", "test")
CARVE_BUCKETS = 100  # hash bucket 0 -> dev, 1 -> test, the rest -> train
_NOT_WORD = re.compile(r"[^\w\s]+")


def open_binary(path: Path) -> BinaryIO:
    """`path` opened for reading bytes, decompressed if its name ends in `.gz`."""
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_lines(path: Path) -> Iterator[bytes]:
    """The raw lines of a file, line endings included (lazy: nothing opens until iterated)."""
    with open_binary(path) as handle:
        yield from handle


def split_files(path: str | Path) -> dict[str, Path] | None:
    """`{"train", "dev", "test"} -> file` when PATH has dev/test siblings, else None: PATH's
    name contains `train` and the names with its last `train` replaced by `dev` and by `test`
    both exist."""
    path = Path(path)
    if "train" not in path.name:
        return None
    head, _, tail = path.name.rpartition("train")
    files = {split: path.with_name(f"{head}{split}{tail}") for split in SPLITS}
    if files["dev"].is_file() and files["test"].is_file():
        return files
    return None


def text_dataset(source: str | Path, target: str | Path) -> str:
    """The dataset string `text:SOURCE,TARGET` of two aligned files."""
    return f"{TEXT_PREFIX}{source},{target}"


def parse_text_dataset(dataset: str) -> tuple[Path, Path]:
    """The two files of `text:SOURCE,TARGET`. A comma inside a file name works when exactly one
    comma splits the rest into two existing files."""
    rest = dataset.removeprefix(TEXT_PREFIX)
    cuts = [i for i, char in enumerate(rest) if char == ","]
    candidates = [(Path(rest[:i]), Path(rest[i + 1 :])) for i in cuts]
    existing = [pair for pair in candidates if pair[0].is_file() and pair[1].is_file()]
    if len(existing) == 1:
        return existing[0]
    if len(candidates) == 1:
        missing = [str(path) for path in candidates[0] if not path.is_file()]
        raise ValueError(
            f"text file not found: {', '.join(missing)}. Received: dataset={dataset!r}"
        )
    raise ValueError(
        "Expected text:SOURCE,TARGET, two existing files separated by one comma. "
        f"Received: dataset={dataset!r}"
    )


def text_split_files(source: Path, target: Path) -> dict[str, tuple[Path, Path]] | None:
    """`split -> (source, target)` when both files have dev/test siblings (`split_files`),
    e.g. `train.en,train.de` next to `dev.en`, `dev.de`, `test.en`, `test.de`; else None."""
    sources, targets = split_files(source), split_files(target)
    if sources is None or targets is None:
        return None
    return {split: (sources[split], targets[split]) for split in SPLITS}


def count_lines(path: Path) -> int:
    """Lines of a file, not counting blank lines at its end."""
    count = last_non_blank = 0
    for line in read_lines(path):
        count += 1
        if line.strip():
            last_non_blank = count
    return last_non_blank


def check_aligned(source: Path, target: Path) -> None:
    """Raise a ValueError naming both files and both line counts unless they match (blank
    lines at the end do not count)."""
    counts = count_lines(source), count_lines(target)
    if counts[0] != counts[1]:
        raise ValueError(
            "Source and target files must have the same number of lines (one sentence per "
            f"line). Received: {source} has {counts[0]} lines, {target} has {counts[1]} lines"
        )


def normalize_source(text: str) -> str:
    """The form of a source sentence that decides its carve-off split (see the module)."""
    text = _NOT_WORD.sub("", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(text.split())


def source_key(source: bytes) -> bytes:
    """Hash key of a raw source side: 8 bytes of BLAKE2b of its normalized UTF-8 text."""
    text = normalize_source(source.decode("utf-8", errors="replace"))
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()


def carve_keys(sources: Iterable[bytes | None]) -> tuple[frozenset[bytes], frozenset[bytes]]:
    """The keys (`source_key`) of the sources carved off for dev and for test.

    Args:
        sources: the raw source side of every line (None or blank: a line that has no split of
            its own; train reads and counts it).

    Buckets of the key give about 1% of the distinct keys each; if a split came out empty
    and there are at least 3 distinct keys, the smallest train key moves into it (train
    keeps at least one).
    """
    dev, test, train = set(), set(), set()
    for source in sources:
        if source is None or not source.strip():
            continue
        key = source_key(source)
        bucket = int.from_bytes(key, "big") % CARVE_BUCKETS
        (dev if bucket == 0 else test if bucket == 1 else train).add(key)
    if len(dev) + len(test) + len(train) >= 3:
        spare = heapq.nsmallest(2, train)
        for keys in (dev, test):
            if not keys and len(train) > 1:  # train keeps at least one key
                keys.add(spare[0])
                train.discard(spare.pop(0))
    return frozenset(dev), frozenset(test)


def carve_split(
    source: bytes | None, dev_keys: frozenset[bytes], test_keys: frozenset[bytes]
) -> str:
    """The split of a line whose raw source side is `source` (see `carve_keys`)."""
    if source is None or not source.strip():
        return "train"
    key = source_key(source)
    if key in dev_keys:
        return "dev"
    if key in test_keys:
        return "test"
    return "train"
