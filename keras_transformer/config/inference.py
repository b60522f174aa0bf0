"""Inference options, frozen dataclasses passed from the commands to the decoders: the search
(`SearchOptions`: beam size, length penalty, length limits, n-best, XLA buffers, stop rule),
whole inputs (`DocumentOptions`: segmentation, overlong sentences, input limits) and word
alignments (`AlignmentOptions`: which cross-attention they read).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from keras_transformer.checks import check_choice, check_int, check_number

STOP_LOOKAHEADS = ("limit", "next")  # SearchOptions.stop_lookahead


@dataclass(frozen=True)
class SearchOptions:
    """How to decode: the paper's inference settings (section 6.1) are the defaults, written
    here once and used by the translator, evaluation, attention plots, export, training's
    final evaluation and every command-line flag. One exception, measured: runs of the quick
    preset evaluate and export with alpha `QUICK_EVAL_ALPHA` (`eval_alpha_for`), and the
    commands' `--alpha` defaults to the alpha of the run they load.

    Args:
        beam_size: hypotheses kept per source (paper: 4).
        alpha: GNMT length penalty exponent (paper: 0.6).
        max_extra_length: a source of n tokens gets at most n + max_extra_length output
            tokens (paper: 50).
        n_best: hypotheses returned per source, best first (at most beam_size).
        padded_decode: fixed-size decoding buffers (static shapes, for XLA).
        stop_early: stop once no live beam can beat the kept finished hypotheses.
        stop_lookahead: how far ahead `stop_early` looks for a live beam that could still win:
            "limit" (any length up to its limit: never changes the result; tensor2tensor's
            rule) or "next" (only if it ended at the next step: Hugging Face's heuristic, close
            to CTranslate2's top-beam exit; fewer steps, may rarely change a result).
    """

    beam_size: int = 4
    alpha: float = 0.6
    max_extra_length: int = 50
    n_best: int = 1
    padded_decode: bool = False
    stop_early: bool = True
    stop_lookahead: str = "limit"

    def __post_init__(self) -> None:
        check_int("beam_size", self.beam_size)
        check_choice("stop_lookahead", self.stop_lookahead, STOP_LOOKAHEADS)
        check_int("n_best", self.n_best)
        if self.n_best > self.beam_size:
            raise ValueError(
                "n_best cannot exceed beam_size. "
                f"Received: n_best={self.n_best}, beam_size={self.beam_size}"
            )
        check_number("alpha", self.alpha, minimum=0)  # 0: no length penalty
        check_int("max_extra_length", self.max_extra_length, minimum=0)

    def replace(self, **changes: Any) -> SearchOptions:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


OVERLONG = ("split", "truncate")  # what happens to a segment longer than the model takes


@dataclass(frozen=True)
class DocumentOptions:
    """How a whole input (a paragraph, a page, a document) is translated: every entry point
    (`Translator`, the export's signatures, `translate.py`, `evaluate.py --segment`) splits it
    into sentences, translates all sentences of a batch together and joins each input's
    translations back with its own whitespace (`keras_transformer.data.segmenter`).

    Args:
        segment: split inputs into sentences; False sends each input whole (a line of a
            sentence-per-line file is then one segment).
        overlong: a segment longer than `max_segment_pieces` subword pieces is "split" further
            at piece boundaries near the limit (after a comma or semicolon where there is one,
            else between words) and every part is translated; "truncate" keeps only its first
            `max_length - 1` pieces (the behaviour before documents; eager calls warn).
        max_segment_pieces: the longest segment sent to the model, in pieces; None: a quarter
            of the model's `max_length`: the best dev BLEU of the quick preset on sentences
            and close to the best on documents stripped of punctuation
            (benchmarks/results/2026-11-25-benchmarks-history.md, "Whole inputs: documents
            against sentences, and where to cut a long sentence": `python pipelines/evaluate.py
            --split dev --segment --max-segment-pieces L`).
        max_input_bytes: longer inputs are refused (InvalidArgumentError, INVALID_ARGUMENT
            over TF Serving) with a message that names the limit. A policy, not a measured
            optimum: memory is bounded by `batch_size` and time grows with the input, so the
            limit (about 15,000 words) bounds how long one request holds a server.
        batch_size: segments per beam search; the segments of a batch of inputs are sorted
            by length and searched in batches of this size, the fastest size measured on a
            2-core CPU (benchmarks/results/2026-11-25-benchmarks-history.md, "Whole inputs:
            documents against sentences, and where to cut a long sentence": `python
            benchmarks/serving_benchmark.py --export-dir EXPORT --documents N`).
    """

    segment: bool = True
    overlong: str = "split"
    max_segment_pieces: int | None = None
    max_input_bytes: int = 100_000
    batch_size: int = 128

    def __post_init__(self) -> None:
        if not isinstance(self.segment, bool):
            raise ValueError(f"segment must be a bool. Received: segment={self.segment!r}")
        check_choice("overlong", self.overlong, OVERLONG)
        if self.max_segment_pieces is not None:
            check_int("max_segment_pieces", self.max_segment_pieces)
        check_int("max_input_bytes", self.max_input_bytes)
        check_int("batch_size", self.batch_size)

    @classmethod
    def sentences(cls, **overrides: Any) -> DocumentOptions:
        """Each input is one sentence, cut at the model's `max_length` (the behaviour before
        documents): sentence-level evaluation, whose figures stay comparable."""
        return cls(**{"segment": False, "overlong": "truncate", **overrides})

    def segment_limit(self, max_length: int) -> int:
        """The longest segment in pieces for a model of `max_length` (EOS not counted)."""
        limit = self.max_segment_pieces or max_length // 4
        return max(1, min(limit, max_length - 1))

    def replace(self, **changes: Any) -> DocumentOptions:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


ALIGNMENT_ROWS = ("predict", "input")  # the attention row read for an output piece


@dataclass(frozen=True)
class AlignmentOptions:
    """Which cross-attention gives the word alignments (`decoding.alignments`): `layer`'s
    `head` (None: the mean over heads), read at the `row` that predicts each output piece
    ("predict") or that takes it as the decoder's input ("input").

    The default is the lowest alignment error rate of an unguided model on the hand-aligned
    gold set (26 dev pairs, 223 links, benchmarks/data/alignment_gold.tsv): the last layer's
    mean, AER 0.37. A run trained with `--guided-alignment` aligns with the head it trained
    (`guided()`): AER 0.23 against its own mean's 0.36
    (benchmarks/results/2026-11-26-issue-53-guided-alignment.md).
    """

    layer: int = -1
    head: int | None = None
    row: str = "predict"

    def __post_init__(self) -> None:
        check_choice("row", self.row, ALIGNMENT_ROWS)
        if not isinstance(self.layer, int) or not (self.head is None or isinstance(self.head, int)):
            raise ValueError(
                f"layer must be an int and head an int or None. Received: layer={self.layer!r}, "
                f"head={self.head!r}"
            )

    @classmethod
    def guided(cls) -> AlignmentOptions:
        """The head that `--guided-alignment` trains (`training.guided_alignment`): head 0 of
        the last decoder layer, at the row that predicts each piece (OpenNMT-tf's choice)."""
        return cls(layer=-1, head=0, row="predict")

    def kwargs(self) -> dict[str, Any]:
        """`layer`, `head` and `row` as keyword arguments of `alignments.align_ids`."""
        return dataclasses.asdict(self)
