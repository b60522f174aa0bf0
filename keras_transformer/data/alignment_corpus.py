"""Word alignments of a training corpus for guided alignment: the file, its symmetrization and
its piece-level form in the input pipeline.

    links = grow_diag_final_and(forward, reverse)   # {(i, j)}: source word i - target word j
    pairs = with_alignments(pairs, "train.align")   # + "alignment": b"0-0 1-2 ..." per pair
    gold = gold_matrix(strings, source, labels, starts)  # float32 (batch, tgt_len, src_len)

The file has one line per training pair, in the order `corpus.read_split(cfg, "train")` reads
them: Moses "i-j" pairs over the whitespace words of source and target (what
`keras-transformer-align-corpus` writes with eflomal). Words, not pieces: the aligner's
statistics are over words (pieces of one word share them), the file does not depend on the
vocabulary, and `decoding.alignments` links whitespace words too. The input pipeline maps each
word link to all pairs of the two words' pieces (`gold_matrix`): a piece that starts with
SentencePiece's "\u2581" starts a word (`piece_words`), so the mapping is in-graph.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

WORD_START = "\u2581"
Links = set[tuple[int, int]]


def word_start_table(model_proto: bytes) -> np.ndarray:
    """int32 `(vocab,)`: 1 where the piece starts a whitespace word ("\u2581..."), else 0."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=model_proto)
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    return np.asarray([int(p.startswith(WORD_START)) for p in pieces], np.int32)


def piece_words(ids, starts, pad_id: int, eos_id: int) -> tf.Tensor:
    """int `(batch, len)` piece ids -> int32 `(batch, len)`: the word each piece belongs to,
    -1 for padding and EOS (the first piece always begins word 0)."""
    ids = tf.cast(ids, tf.int32)
    valid = tf.not_equal(ids, pad_id) & tf.not_equal(ids, eos_id)  # (batch, len)
    begins = tf.gather(tf.convert_to_tensor(starts, tf.int32), ids)  # (batch, len)
    first = tf.equal(tf.range(tf.shape(ids)[1]), 0)[None, :]  # the first piece begins a word
    begins = tf.cast((tf.equal(begins, 1) | first) & valid, tf.int32)
    index = tf.cumsum(begins, axis=1) - 1  # (batch, len)
    return tf.where(valid, index, -1)


# Symmetrization (Koehn et al. 2003; Moses' grow-diag-final-and) -----------------------------

_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def grow_diag_final_and(forward: Links, reverse: Links) -> Links:
    """Moses' grow-diag-final-and of two directional alignments, each `{(i, j)}` (source
    word i, target word j): start from their intersection, add union links next to (also
    diagonally) a link while one of its words is still unaligned, then union links whose
    words are both unaligned ("final-and"), forward's first."""
    union = forward | reverse
    links = set(forward & reverse)
    aligned_source = {i for i, _ in links}
    aligned_target = {j for _, j in links}
    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in _NEIGHBOURS:
                new = (i + di, j + dj)
                free = new[0] not in aligned_source or new[1] not in aligned_target
                if new in union and new not in links and free:
                    links.add(new)
                    aligned_source.add(new[0])
                    aligned_target.add(new[1])
                    grown = True
    for directional in (forward, reverse):
        for i, j in sorted(directional):
            if i not in aligned_source and j not in aligned_target:
                links.add((i, j))
                aligned_source.add(i)
                aligned_target.add(j)
    return links


def moses_line(links: Links) -> str:
    """{(1, 2), (0, 0)} -> "0-0 1-2" (sorted)."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def parse_line(line: str) -> Links:
    """ "0-0 1-2" -> {(0, 0), (1, 2)}; raises ValueError naming a malformed pair."""
    links = set()
    for pair in line.split():
        i, sep, j = pair.partition("-")
        if not (sep and i.isdigit() and j.isdigit()):
            raise ValueError(f"An alignment pair must be I-J. Received: pair={pair!r}")
        links.add((int(i), int(j)))
    return links


# The training input ------------------------------------------------------------------------


def count_lines(path: str) -> int:
    """Lines of the alignment file `path` (a pair without links is an empty line)."""
    with tf.io.gfile.GFile(path, "rb") as f:
        return sum(1 for _ in f)


def with_alignments(pairs: tf.data.Dataset, path: str) -> tf.data.Dataset:
    """`{"source", "target"}` string elements -> the same with `"alignment"`: line k of the
    alignment file `path` for pair k (the caller checks the counts, `count_lines`)."""
    lines = tf.data.TextLineDataset(path)
    return tf.data.Dataset.zip(pairs, lines).map(
        lambda pair, line: {**pair, "alignment": line}, num_parallel_calls=tf.data.AUTOTUNE
    )


def word_link_matrix(strings, source_words: int, target_words: int) -> tf.Tensor:
    """string `(batch,)` Moses lines -> float32 `(batch, target_words, source_words)`, 1 where
    target word j is linked to source word i; pairs outside the sizes are dropped."""
    pairs = tf.strings.split(tf.strings.split(strings), "-")  # (b, links, 2) ragged strings
    numbers = tf.strings.to_number(pairs.flat_values, tf.int32)  # (total * 2,)
    numbers = tf.reshape(numbers, [-1, 2])  # -> (total links, 2): (i, j)
    rows = tf.cast(pairs.value_rowids(), tf.int32)  # (total links,): the batch row
    inside = (numbers[:, 0] < source_words) & (numbers[:, 1] < target_words)
    index = tf.stack([rows, numbers[:, 1], numbers[:, 0]], axis=1)  # -> (links, 3): b, j, i
    index = tf.boolean_mask(index, inside)
    shape = tf.stack([tf.size(strings), target_words, source_words])
    ones = tf.ones(tf.shape(index)[:1], tf.float32)
    return tf.minimum(tf.scatter_nd(index, ones, shape), 1.0)  # duplicates count once


def gold_matrix(strings, source, labels, starts, pad_id: int, eos_id: int) -> tf.Tensor:
    """float32 `(batch, tgt_len, src_len)`: for each label piece (the row of the decoder step
    that predicts it), the source pieces of the words its word is linked to, normalized to sum
    1; rows of unlinked pieces, EOS and padding are 0. `strings` string `(batch,)` Moses
    lines over words; `source`, `labels` int `(batch, len)` (pieces + EOS, padded)."""
    source_words = piece_words(source, starts, pad_id, eos_id)  # (b, src_len)
    target_words = piece_words(labels, starts, pad_id, eos_id)  # (b, tgt_len)
    n_source = tf.maximum(tf.reduce_max(source_words) + 1, 1)
    n_target = tf.maximum(tf.reduce_max(target_words) + 1, 1)
    words = word_link_matrix(strings, n_source, n_target)  # (b, TW, SW)
    to_source = tf.one_hot(source_words, n_source)  # (b, src_len, SW), 0 rows at -1
    to_target = tf.one_hot(target_words, n_target)  # (b, tgt_len, TW)
    pieces = tf.einsum("btk,bkj,bsj->bts", to_target, words, to_source)  # -> (b, tgt, src)
    total = tf.reduce_sum(pieces, axis=2, keepdims=True)  # (b, tgt_len, 1)
    return tf.math.divide_no_nan(pieces, total)


# The aligner (eflomal, an optional extra: `pip install keras-transformer[align]`) ----------


def eflomal_links(sources, targets, seed: int = 1) -> tuple[list[Links], list[Links]]:
    """Forward and reverse eflomal alignments (`(list of {(i, j)}, list of {(i, j)})`, both
    source word i - target word j) of the sentences `sources` and `targets` (whitespace
    words; eflomal lowercases). Raises ImportError naming the extra without eflomal."""
    try:
        import eflomal
    except ImportError as error:
        raise ImportError(
            "Aligning a corpus needs eflomal: pip install 'keras-transformer[align]'"
        ) from error
    import os
    import random
    import tempfile

    random.seed(seed)
    with tempfile.TemporaryDirectory() as directory:
        forward, reverse = (os.path.join(directory, name) for name in ("fwd", "rev"))
        eflomal.Aligner().align(
            [s + "\n" for s in sources], [t + "\n" for t in targets],
            links_filename_fwd=forward, links_filename_rev=reverse,
        )  # fmt: skip
        return _read_links(forward), _read_links(reverse)


def _read_links(path: str) -> list[Links]:
    with open(path, encoding="utf-8") as f:
        return [parse_line(line) for line in f]


def symmetrized_lines(sources, targets, method: str = "grow-diag-final-and") -> list[str]:
    """Moses lines of the pairs `(sources[k], targets[k])`: eflomal both ways, then
    `method` (grow-diag-final-and, intersection or union)."""
    combine = SYMMETRIZATIONS.get(method)
    if combine is None:
        raise ValueError(
            f"method must be one of {sorted(SYMMETRIZATIONS)}. Received: method={method!r}"
        )
    forward, reverse = eflomal_links(sources, targets)
    return [moses_line(combine(f, r)) for f, r in zip(forward, reverse)]


SYMMETRIZATIONS = {
    "grow-diag-final-and": grow_diag_final_and,
    "intersection": lambda forward, reverse: forward & reverse,
    "union": lambda forward, reverse: forward | reverse,
}
