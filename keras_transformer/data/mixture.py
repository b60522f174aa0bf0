"""Weighted mixes of training corpora: `SPEC[@WEIGHT]+SPEC[@WEIGHT]...`, e.g.
`sample_en_de+tsv:own.tsv@3`.

Each SPEC is a dataset of `keras_transformer.data.corpus`; WEIGHT is a positive number
(default 1). A `+` separates corpora only where a dataset name or prefix (`tsv:`, `text:`)
follows it, and `@WEIGHT` is a weight only when WEIGHT is a number, so other `+` and `@` can stay
in file names.

One epoch of a mix is finite and deterministic: corpus i contributes `round(weight_i * n_i)`
pairs (half up), n_i being its kept training pairs, cycling through it from its start (weight
3: three passes over it; 0.5: its first half), and the corpora are interleaved evenly (smooth
weighted round robin): every prefix of the epoch holds each corpus's share, to within one
pair. So the first pairs (the tokenizer's sample, a `limit`) are a proportional sample, and the
shuffle buffer of `pipeline.make_batches` mixes corpora of any size. The epoch is a pure function
of the corpora and weights: the seeded, step-indexed training stream (resume by skipping
batches, `cache=True` of the epoch) works unchanged. Dev and test of a mix are its first
corpus's. Each epoch starts by reading every corpus once to count n_i (a WMT corpus in a mix:
its millions of pairs through Python, minutes), and `cache=True` keeps the whole epoch (weight
3: three copies of that corpus) in memory.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

Item = TypeVar("Item")


@dataclass(frozen=True)
class MixPart:
    """One corpus of a mix: its dataset string and its weight."""

    dataset: str
    weight: float = 1.0


def parse_mix(dataset: str, starts: Sequence[str]) -> list[MixPart] | None:
    """The corpora of a mix, or None when `dataset` is one corpus without a weight.

    Args:
        dataset: `SPEC[@WEIGHT]+SPEC[@WEIGHT]...`.
        starts: the dataset names and prefixes a SPEC may begin with.
    """
    follows = "|".join(re.escape(start) for start in starts)
    specs = re.split(rf"\+(?=(?:{follows}))", dataset)
    parts = [_part(spec, dataset) for spec in specs]
    if len(parts) == 1 and parts[0].dataset == dataset:
        return None
    return parts


def _part(spec: str, dataset: str) -> MixPart:
    head, at, tail = spec.rpartition("@")
    try:
        weight = float(tail) if at else None
    except ValueError:
        weight = None  # an `@` of a file name
    if weight is None:
        return MixPart(spec)
    if not math.isfinite(weight) or weight <= 0:
        raise ValueError(
            f"A corpus weight must be a positive number. Received: {spec!r} in dataset={dataset!r}"
        )
    return MixPart(head, weight)


def quotas(parts: Sequence[MixPart], sizes: Sequence[int]) -> list[int]:
    """Pairs each corpus contributes to one epoch: `weight * size`, rounded half up."""
    return [math.floor(part.weight * size + 0.5) for part, size in zip(parts, sizes)]


def interleave(counts: Sequence[int]) -> Iterator[int]:
    """Corpus indices in epoch order: index i `counts[i]` times, spread evenly (the k-th pair of
    corpus i sits at fraction (k + 0.5) / counts[i] of the epoch; ties: the lower index)."""
    heap = [(0.5 / count, i) for i, count in enumerate(counts) if count > 0]
    heapq.heapify(heap)
    taken = [0] * len(counts)
    while heap:
        _, i = heapq.heappop(heap)
        yield i
        taken[i] += 1
        if taken[i] < counts[i]:
            heapq.heappush(heap, ((taken[i] + 0.5) / counts[i], i))


def mixed_pairs(
    parts: Sequence[MixPart], sizes: Sequence[int], read: Callable[[str], Iterable[Item]]
) -> Iterator[Item]:
    """One epoch of the mix; `read(dataset)` reads a corpus from its start (called again to
    cycle through it)."""
    streams = [_cycle(read, part.dataset) for part in parts]
    try:
        for i in interleave(quotas(parts, sizes)):
            yield next(streams[i])
    finally:
        for stream in streams:
            stream.close()  # closes the files of a corpus left in the middle


def _cycle(read: Callable[[str], Iterable[Item]], dataset: str) -> Iterator[Item]:
    while True:
        empty = True
        for item in read(dataset):
            empty = False
            yield item
        if empty:
            raise ValueError(f"The corpus has no pair to cycle through. Received: {dataset!r}")


def describe(parts: Sequence[MixPart], sizes: Sequence[int]) -> str:
    """What each corpus contributes to an epoch, as one line."""
    counts = quotas(parts, sizes)
    shares = ", ".join(
        f"{part.dataset} {count} ({size} x {part.weight:g})"
        for part, size, count in zip(parts, sizes, counts)
    )
    return f"mix epoch of {sum(counts)} pairs: {shares}"
