"""The manifest of a prepared corpus (`prepared:DIR`, written by `data.prepared.prepare`):
plain Python, no TensorFlow, so `corpus` can resolve a prepared dataset's text splits.

`DIR/manifest.json`:

    {"format": 1, "dataset": "tsv:/data/train.tsv", "reverse": false, "max_chars": 1000,
     "vocabulary": {"file": "spm.model", "sha256": "...", "pieces": 8000},
     "examples": 4500000, "examples_per_shard": 20000,
     "shards": [{"file": "train-00000.tfrecord", "examples": 20000, "bytes": 1234567,
                 "lengths": [[length, count], ...]}, ...]}

A shard's `lengths` is the histogram of each example's `max(source, target) + 1` pieces (EOS or
BOS included): the reader counts each shard's batches for any `max_length` and bucketing from
it, without reading the shard, and so seeks to a step in time independent of the step.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

PREFIX = "prepared:"
MANIFEST_FILE = "manifest.json"
VOCABULARY_FILE = "spm.model"
FORMAT = 1


@dataclass(frozen=True)
class Shard:
    """One TFRecord file of a prepared corpus: its name in DIR, example count, size in bytes
    and length histogram (`[[max(source, target) + 1, count], ...]`)."""

    file: str
    examples: int
    bytes: int
    lengths: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Manifest:
    """What `manifest.json` records (see the module docstring)."""

    directory: str
    dataset: str
    reverse: bool
    max_chars: int
    vocabulary_sha256: str
    pieces: int
    examples_per_shard: int
    shards: tuple[Shard, ...]

    @property
    def vocabulary_file(self) -> str:
        return os.path.join(self.directory, VOCABULARY_FILE)

    @property
    def examples(self) -> int:
        return sum(shard.examples for shard in self.shards)

    def shard_path(self, shard: Shard) -> str:
        return os.path.join(self.directory, shard.file)

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "dataset": self.dataset,
            "reverse": self.reverse,
            "max_chars": self.max_chars,
            "vocabulary": {
                "file": VOCABULARY_FILE,
                "sha256": self.vocabulary_sha256,
                "pieces": self.pieces,
            },
            "examples": self.examples,
            "examples_per_shard": self.examples_per_shard,
            "shards": [
                {"file": s.file, "examples": s.examples, "bytes": s.bytes,
                 "lengths": [list(pair) for pair in s.lengths]}
                for s in self.shards
            ],
        }  # fmt: skip


def is_prepared(dataset: str) -> bool:
    """Whether `dataset` names a prepared corpus (`prepared:DIR`)."""
    return dataset.startswith(PREFIX)


def directory_of(dataset: str) -> str:
    """DIR of `prepared:DIR`."""
    if not is_prepared(dataset):
        raise ValueError(f"Expected 'prepared:DIR'. Received: dataset={dataset!r}")
    return dataset.removeprefix(PREFIX)


def sha256_of(data: bytes) -> str:
    """The vocabulary checksum: SHA-256 of a SentencePiece model's bytes."""
    return hashlib.sha256(data).hexdigest()


def load(dataset_or_directory: str) -> Manifest:
    """The manifest of `prepared:DIR` (or of DIR); a ValueError naming the path if it has none
    or one of another format."""
    directory = dataset_or_directory.removeprefix(PREFIX)
    path = os.path.join(directory, MANIFEST_FILE)
    if not os.path.isfile(path):
        raise ValueError(
            f"No prepared corpus (no {MANIFEST_FILE}) in {directory!r}: run "
            f"keras-transformer-prepare-data first. Received: dataset={PREFIX}{directory}"
        )
    with open(path) as f:
        raw = json.load(f)
    if raw.get("format") != FORMAT:
        raise ValueError(
            f"{path} has format {raw.get('format')!r}, this version reads {FORMAT}: prepare "
            f"the corpus again. Received: dataset={PREFIX}{directory}"
        )
    shards = tuple(
        Shard(s["file"], s["examples"], s["bytes"], tuple(tuple(p) for p in s["lengths"]))
        for s in raw["shards"]
    )
    vocabulary = raw["vocabulary"]
    return Manifest(
        directory, raw["dataset"], raw["reverse"], raw["max_chars"], vocabulary["sha256"],
        vocabulary["pieces"], raw["examples_per_shard"], shards,
    )  # fmt: skip


def save(manifest: Manifest) -> str:
    """Write `DIR/manifest.json` atomically (last, so a directory with a manifest is complete);
    returns its path."""
    path = os.path.join(manifest.directory, MANIFEST_FILE)
    with open(path + ".partial", "w") as f:
        json.dump(manifest.to_json(), f, indent=1)
    os.replace(path + ".partial", path)
    return path


def check_vocabulary(manifest: Manifest, model_proto: bytes, where: str) -> None:
    """Refuse a run whose tokenizer (`model_proto`, read from `where`) is not the one the corpus
    was prepared with: a ValueError naming both checksums and files."""
    actual = sha256_of(model_proto)
    if actual != manifest.vocabulary_sha256:
        raise ValueError(
            f"The prepared corpus {manifest.directory!r} was tokenized with another vocabulary: "
            f"sha256 {manifest.vocabulary_sha256[:16]}... ({manifest.vocabulary_file}) there, "
            f"sha256 {actual[:16]}... ({where}) in this run. Prepare the corpus with this run's "
            "vocabulary (--vocab) or train with the corpus's (leave out --vocab, new --model-dir)"
        )
