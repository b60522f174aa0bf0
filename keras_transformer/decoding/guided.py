"""Translations a translator steers: a target prefix, alternatives after it, terminology
(`constraints`, `avoid`, a `glossary`), strings in and strings out in TF ops only (the export's
`translate_guided` and `translate_alternatives` signatures run it; `constraints.py` is the
search).

    out = translate_guided(translator, texts, prefix=["Klicken Sie auf die Sch", ""],
                           constraints=["Tabellendokument", ""], avoid=["", "Haus"],
                           glossary=["spreadsheet\\tTabellendokument", ""])
    out["translations"], out["scores"], out["constraints_met"]   # each (batch,)
    translate_guided(translator, texts, prefix=prefixes, alternatives=3)  # (batch, 3) each

Every input is a string `(batch,)` ("" for none), so a server can batch requests:

- `prefix`: the translation starts with it byte for byte and continues it. Its pieces are
  forced (the batch's shortest prefix run through the decoder once to fill the cache,
  `decoding.prefill`, the rest by loop steps); when it does not end with whitespace its last
  word may be unfinished: the last piece of that word is left free, restricted to the pieces
  that start with its text ("Sch" -> "Schaltfläche"); after a prefix that ends with
  whitespace, to pieces that start a word. EOS is never allowed right after a prefix (the
  output does not stop there). The output is the prefix itself followed by the detokenized
  continuation.
- `alternatives=k`: k continuations of the prefix that differ in their first piece (the k
  most likely), each completed by beam search, ranked by score. Only the sentence that takes
  the prefix branches (k searches); each other sentence is searched once and its
  translation joined to every alternative.
- `constraints`: tab-separated target phrases that must appear; `avoid`: tab-separated
  phrases that never do; `glossary`: `source<TAB>target` lines: the target is a constraint of
  every sentence whose source contains the source term (case-insensitive, at word
  boundaries, literally: the term is escaped before it becomes an RE2 pattern).
- Several sentences: inputs are segmented as plain translations are, and an overlong
  sentence is cut into chunks as there (`guided_chunks`: the prefix and explicit constraints
  go to its first chunk, glossary targets to the chunks holding their terms); the prefix and
  the explicit constraints go to the first non-empty sentence, `avoid` to every sentence,
  glossary targets to the sentences whose source has the term. `constraints_met` is true
  when every sentence's output holds all of its constraints.

Limits (`GuideLimits`, refused with InvalidArgumentError, INVALID_ARGUMENT when served): bytes
of a prefix and of each other field, phrases per sentence, pieces per phrase, glossary lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from keras_transformer.config import SearchOptions
from keras_transformer.constants import BOS_ID, EOS_ID, GUIDE_KEYS, PAD_ID, UNK_ID
from keras_transformer.data.input_checks import check_size, check_utf8
from keras_transformer.data.segmenter import segment
from keras_transformer.decoding.constraints import Guide, GuidedBeamSearch, phrases_met
from keras_transformer.decoding.guided_chunks import Chunks, join_chunks, split_sentences
from keras_transformer.decoding.incremental import per_source_step
from keras_transformer.decoding.loop import LoopOptions, decode
from keras_transformer.decoding.prefill import Prefill, fill_cache, shortest_prefix
from keras_transformer.decoding.search import prepare_source
from keras_transformer.tracing import graph_function

WORD_START = "\u2581"  # SentencePiece's "▁"
WORD = r"[\pL\pN_]"
ESCAPE = r"([!-/:-@\[-`{-~])"  # every ASCII punctuation character: RE2 reads "\x" as x


@dataclass(frozen=True)
class GuideLimits:
    """Per-request limits of a guided translation (stated in BUILD.md)."""

    prefix_bytes: int = 2_000
    field_bytes: int = 20_000  # constraints, avoid, glossary: each input's string
    phrases: int = 16  # constraints (explicit and glossary) per sentence; avoid per input
    phrase_pieces: int = 16
    glossary_lines: int = 100
    alternatives: int = 8


def piece_strings(model_proto: bytes) -> np.ndarray:
    """The text of every piece id, `(vocab,)` bytes (a NumPy array: each traced function
    makes its own constant)."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=model_proto)
    return np.asarray(
        [processor.id_to_piece(i).encode() for i in range(processor.get_piece_size())], object
    )


def check_at_most(values, limit: int, message: str):
    return tf.debugging.assert_less_equal(
        tf.cast(values, tf.int64), tf.constant(limit, tf.int64), message=message, summarize=8
    )


def split_phrases(fields, separator: str = "\t") -> tf.RaggedTensor:
    """String `(n,)` -> ragged `(n, None)`: the `separator`-separated phrases, stripped, empty
    ones dropped."""
    parts = tf.strings.strip(tf.strings.split(fields, separator))
    return tf.ragged.boolean_mask(parts, tf.strings.length(parts) > 0)


def parse_glossary(glossary, limits: GuideLimits) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """String `(batch,)` of `source<TAB>target` lines -> `(sources, targets)` ragged
    `(batch, None)`; a malformed line (not two non-empty fields) fails an assertion that
    quotes it."""
    lines = tf.strings.regex_replace(tf.strings.split(glossary, "\n"), "\r$", "")
    lines = tf.ragged.boolean_mask(lines, tf.strings.length(tf.strings.strip(lines)) > 0)
    flat = lines.flat_values
    good = tf.strings.regex_full_match(flat, r"[^\t]*[^\t\s][^\t]*\t[^\t]*[^\t\s][^\t]*")
    checks = [
        tf.debugging.Assert(
            tf.reduce_all(good),
            ["malformed glossary line (expected source<TAB>target):", tf.boolean_mask(flat, ~good)],
            summarize=3,
        ),
        check_at_most(lines.row_lengths(), limits.glossary_lines,
                      f"glossary longer than {limits.glossary_lines} lines. Lines received:"),
    ]  # fmt: skip
    with tf.control_dependencies(checks):
        fields = tf.strings.split(tf.identity(flat), "\t").to_tensor(shape=[None, 2])
    sources, targets = tf.strings.strip(fields[:, 0]), tf.strings.strip(fields[:, 1])
    splits = lines.row_splits
    return (
        tf.RaggedTensor.from_row_splits(sources, splits),
        tf.RaggedTensor.from_row_splits(targets, splits),
    )


def term_patterns(terms) -> tf.Tensor:
    """RE2 patterns `(n,)` that fully match a text holding the term, case-insensitively, at
    word boundaries, the term read literally (its punctuation escaped)."""
    escaped = tf.strings.regex_replace(terms, ESCAPE, r"\\\1")
    return tf.strings.join([f"(?is)(?:.*[^{WORD[1:-1]}])?", escaped, f"(?:[^{WORD[1:-1]}].*)?"])


def glossary_targets(sentences, rows, sources, targets) -> tf.RaggedTensor:
    """Ragged `(n, None)`: the targets of the glossary of each sentence's input (`rows (n,)`)
    whose source term the sentence contains."""
    own_sources, own_targets = tf.gather(sources, rows), tf.gather(targets, rows)  # (n, None)
    texts = tf.repeat(sentences, own_sources.row_lengths())  # one per entry
    patterns = term_patterns(own_sources.flat_values)
    found = tf.map_fn(
        lambda pair: tf.strings.regex_full_match(pair[0], pair[1]), (texts, patterns),
        fn_output_signature=tf.bool,
    )  # fmt: skip
    return tf.ragged.boolean_mask(own_targets, own_targets.with_flat_values(found))


def prefix_parts(tokenize, pieces, prefix, vocab_size: int):
    """The search's view of each prefix `(n,)`: `(forced ragged (n, None) ids, first_allowed
    bool (n, vocab), head_ids ragged (n, None))`, head_ids being every piece of the prefix
    (whose text the output replaces by the prefix itself)."""
    tail = tf.strings.regex_replace(prefix, r"(?s)^.*?(\S*)$", r"\1")  # last word, unfinished
    keep = tf.strings.length(prefix) - tf.strings.length(tail)
    head = tf.strings.substr(prefix, tf.zeros_like(keep), keep)
    head_ids, tail_ids = tokenize(head), tokenize(tail)
    has_tail = tail_ids.row_lengths() > 0  # (n,)
    forced = tf.concat([head_ids, tail_ids[:, :-1]], axis=1)
    ends = tf.maximum(tail_ids.row_splits[1:] - 1, 0)  # (n,) last piece of each tail
    last = tf.gather(tf.concat([tail_ids.flat_values, [0]], 0), ends)  # none at all: id 0
    table = tf.constant(pieces, tf.string)  # (vocab,)
    remainder = tf.where(has_tail, tf.gather(table, last), WORD_START)  # (n,)
    n = tf.shape(prefix)[0]
    by_row = tf.broadcast_to(table[None, :], [n, vocab_size])
    width = tf.broadcast_to(tf.strings.length(remainder)[:, None], [n, vocab_size])
    starts = tf.equal(
        tf.strings.substr(by_row, tf.zeros_like(width), width), remainder[:, None]
    )  # (n, vocab)
    special = tf.reduce_any(
        tf.equal(tf.range(vocab_size)[:, None], [PAD_ID, BOS_ID, EOS_ID]), axis=1
    )  # (vocab,)
    guided = tf.strings.length(prefix) > 0
    first_allowed = ~guided[:, None] | (starts & ~special[None, :])
    return forced, first_allowed, tf.concat([head_ids, tail_ids], axis=1)


def attach_prefix(prefix, texts, head_texts) -> tf.Tensor:
    """`prefix (n,)` + the part of `texts (n, k)` after `head_texts (n,)` (the prefix's pieces
    detokenized): the prefix kept byte for byte; texts as they are where it is empty."""
    head = tf.strings.length(head_texts)[:, None]  # (n, 1)
    length = tf.strings.length(texts)
    start = tf.minimum(head, length)
    rest = tf.strings.substr(texts, start, length - start)
    spaced = tf.strings.regex_full_match(prefix, r"(?s).*\s")[:, None]
    rest = tf.where(spaced, tf.strings.regex_replace(rest, r"^\s+", ""), rest)
    joined = tf.strings.join([tf.broadcast_to(prefix[:, None], tf.shape(texts)), rest])
    return tf.where((tf.strings.length(prefix) > 0)[:, None], joined, texts)


def word_boundaries(pieces) -> np.ndarray:
    """bool `(vocab,)`: the pieces that end the word before them: those that start a word or
    with punctuation, and EOS."""
    starts = [
        p.decode().startswith(WORD_START) or not p.decode()[:1].isalnum() for p in pieces
    ]  # fmt: skip
    starts[EOS_ID] = True
    return np.asarray(starts, bool)


def guided_ids(model, source_ids, options: SearchOptions, guide: Guide, pad_kernels: bool,
               boundary=None, prefill: bool = True):  # fmt: skip
    """Guided beam search of source ids `(n, src_len)`: `(ids (n, 1, len) without BOS,
    scores (n, 1))`. Each item may produce `source length + max_extra_length` tokens, or
    `prefix length + max_extra_length` when longer, at most the model's `max_length`.
    `prefill`: the batch's shortest prefix runs through the decoder in one pass
    (`decoding.prefill`) and the loop starts after it; False: a loop step per forced piece
    (the same ids and scores)."""
    config = model.config
    source, lengths = prepare_source(source_ids, config)
    memory, memory_mask = model.encode(source)
    extra = options.max_extra_length
    wanted = tf.maximum(lengths, guide.prefix_lengths) + extra
    limits = tf.minimum(wanted, config.max_length)  # (n,)
    max_len = tf.reduce_max(tf.concat([limits, [1]], 0))
    options = options.replace(n_best=1)
    step = per_source_step(model, memory, memory_mask, options.beam_size, pad_kernels=pad_kernels)
    bos = tf.fill(tf.shape(source)[:1], config.bos_id)
    loop = LoopOptions(config.eos_id, config.pad_id)
    start, filled = None, None
    if prefill:
        start = shortest_prefix(guide.prefix_lengths)
        step, log_probs = fill_cache(model, step, guide.prefix_ids[:, :start], config.bos_id)
        filled = Prefill(start, log_probs)
    strategy = GuidedBeamSearch(config.vocab_size, options, guide, boundary, filled)
    ids, scores = decode(strategy, step, bos, max_len, loop, max_lengths=limits, start_step=start)
    return ids[:, :, 1:], scores


def sentence_fields(text, prefix, constraints, avoid, segmented: bool):
    """Per sentence: `(segmentation or None, sentences (m,), rows (m,) input of each,
    first (m,) bool: the input's first non-empty sentence, prefix (m,), explicit constraint
    phrases ragged (m, None), avoid phrases ragged (m, None))`."""
    batch = tf.shape(text)[0]
    if segmented:
        segmentation = segment(text)
        sentences = segmentation.segments.flat_values  # (m,)
        rows = tf.cast(segmentation.segments.value_rowids(), tf.int32)
    else:
        segmentation, sentences, rows = None, text, tf.range(batch)
    filled = tf.strings.length(tf.strings.strip(sentences)) > 0
    position = tf.range(tf.shape(sentences)[0])
    first_at = tf.math.unsorted_segment_min(tf.where(filled, position, tf.int32.max), rows, batch)
    opening = tf.math.unsorted_segment_min(position, rows, batch)  # each input's first
    first_at = tf.where(first_at == tf.int32.max, opening, first_at)  # all empty: the first
    first = tf.equal(position, tf.gather(first_at, rows))  # (m,)
    own = tf.where(first, rows, batch)  # row `batch`: an empty one
    sentence_prefix = tf.gather(tf.concat([prefix, [""]], 0), own)
    explicit = tf.gather(split_phrases(tf.concat([constraints, [""]], 0)), own)
    avoided = tf.gather(split_phrases(avoid), rows)
    return segmentation, sentences, rows, first, sentence_prefix, explicit, avoided


def glossary_for(sentences, rows, glossary, limits) -> tf.RaggedTensor:
    sources, targets = parse_glossary(glossary, limits)
    return glossary_targets(sentences, rows, sources, targets)


def phrase_ids(tokenize, phrases: tf.RaggedTensor, limits: GuideLimits, name: str):
    """Ragged strings `(m, None)` -> int32 ragged ids `(m, None, None)`, after assertions on
    the phrase count and their lengths in pieces."""
    ids = tokenize(phrases.flat_values)  # (phrases, None)
    checks = [
        check_at_most(phrases.row_lengths(), limits.phrases,
                      f"more than {limits.phrases} {name} phrases per sentence. Counts:"),
        check_at_most(ids.row_lengths(), limits.phrase_pieces,
                      f"a {name} phrase longer than {limits.phrase_pieces} pieces. Lengths:"),
    ]  # fmt: skip
    with tf.control_dependencies(checks):
        values = tf.identity(ids.flat_values)
    return tf.RaggedTensor.from_row_splits(ids.with_flat_values(values), phrases.row_splits)


def spelled_phrases(ids: tf.RaggedTensor) -> tuple[tf.RaggedTensor, tf.Tensor]:
    """Constraint ids `(m, None, None)` -> `(the phrases the vocabulary spells, unspellable
    (m,) bool)`. A phrase with a character the vocabulary has no piece for tokenizes with
    UNK: forcing it would put UNK (" ⁇ ") where the phrase was asked for, so it is not
    forced, and its row's constraints are not met (a constraint that cannot be met never
    fails a request)."""
    unknown = tf.reduce_any(tf.equal(ids, UNK_ID), axis=2)  # (m, None) per phrase
    return tf.ragged.boolean_mask(ids, ~unknown), tf.reduce_any(unknown, axis=1)


def guide_fields(text, fields, limits: GuideLimits) -> list[tf.Tensor]:
    """The guides `(prefix, constraints, avoid, glossary)` of string `text (batch,)`, each a
    string `(batch,)` or None (all ""), checked: one row per text (a server must not pair a
    request's guides with another row's text), within their byte limits, valid UTF-8."""
    batch = tf.size(text)
    checked = []
    for name, field in zip(GUIDE_KEYS, fields):
        if field is None:
            checked.append(tf.fill(tf.shape(text), ""))
            continue
        field = tf.convert_to_tensor(field, tf.string)
        rows = tf.debugging.assert_equal(
            tf.size(field), batch, message=f"{name} must have one row per text. Rows of "
            f"{name}, then of text:",
        )  # fmt: skip
        with tf.control_dependencies([rows]):
            field = tf.identity(field)
        limit = limits.prefix_bytes if name == "prefix" else limits.field_bytes
        checked.append(check_utf8(check_size(field, limit, name), name))
    return checked


def translate_guided(translator, text, prefix=None, constraints=None, avoid=None, glossary=None,
                     alternatives: int = 0, limits: GuideLimits | None = None,
                     prefill: bool = True) -> dict:  # fmt: skip
    """Guided translation of string `(batch,)` inputs (see the module docstring); every guide
    is a string `(batch,)` or None (all ""). `prefill`: see `guided_ids`.

    Returns `{"translations", "scores", "constraints_met"}`: `(batch,)` each, or `(batch, k)`
    with `alternatives=k`, best first. The shape is always k wide: where fewer than k
    continuations exist (an unfinished word with fewer completions), the missing ones are
    "" with score -inf and `constraints_met` false, after the real ones. Every other score is
    finite."""
    limits = limits or GuideLimits()
    text = check_size(text, translator.documents.max_input_bytes, "input", "max_input_bytes")
    prefix, constraints, avoid, glossary = guide_fields(
        text, (prefix, constraints, avoid, glossary), limits
    )
    parts = sentence_fields(text, prefix, constraints, avoid, translator.documents.segment)
    segmentation, sentences = parts[:2]
    chunks = split_sentences(translator, *parts[1:])  # (c, ...): overlong sentences cut
    wanted = tf.concat(
        [chunks.explicit, glossary_for(chunks.texts, chunks.rows, glossary, limits)], axis=1
    )  # (c, None)
    out = search_sentences(translator, chunks, wanted, alternatives, limits, prefill)
    texts, scores, met = join_chunks(chunks.counts, *out)  # (m, k) each
    if segmentation is None:
        translations = texts
        total, all_met = scores, met
    else:
        translations = segmentation.join(texts)  # (batch, k)
        counts = segmentation.segments.row_lengths()
        total = tf.reduce_sum(tf.RaggedTensor.from_row_lengths(scores, counts), axis=1)
        all_met = tf.reduce_all(tf.RaggedTensor.from_row_lengths(met, counts), axis=1)
    # An alternative that does not exist (fewer completions than k): "", -inf, not met, for
    # the whole input (its other sentences' translations are not joined to nothing).
    missing = tf.equal(total, float("-inf"))
    translations = tf.where(missing, "", translations)
    all_met &= ~missing
    if alternatives:
        return {"translations": translations, "scores": total, "constraints_met": all_met}
    return {
        "translations": translations[:, 0],
        "scores": total[:, 0],
        "constraints_met": all_met[:, 0],
    }


def search_sentences(translator, chunks: Chunks, wanted, alternatives, limits: GuideLimits,
                     prefill: bool = True):  # fmt: skip
    """The guided search of `chunks` (`guided_chunks.Chunks` of c rows, `wanted` their
    constraint phrases ragged `(c, None)`): `(texts, scores, met)` `(c, k)`, k =
    max(alternatives, 1), each row's alternatives best first."""
    config, tokenizer = translator.config, translator.tokenizer
    sentences, first, prefix, avoided = chunks.texts, chunks.first, chunks.prefix, chunks.avoided
    k = max(alternatives, 1)
    pieces = piece_strings(tokenizer.model_proto)
    forced, first_allowed, head_ids = prefix_parts(
        tokenizer.tokenize, pieces, prefix, config.vocab_size)  # fmt: skip
    wanted_ids = phrase_ids(tokenizer.tokenize, wanted, limits, "constraint")
    wanted_ids, unspellable = spelled_phrases(wanted_ids)  # (c, None, None), (c,)
    avoid_ids = phrase_ids(tokenizer.tokenize, avoided, limits, "avoid")
    room = forced.row_lengths() + tf.reduce_sum(wanted_ids.row_lengths(axis=2), axis=1)
    fits = check_at_most(room, config.max_length - 2,
                         f"prefix and constraints longer than the output limit of "
                         f"{config.max_length - 2} pieces. Pieces:")  # fmt: skip
    with tf.control_dependencies([fits]):
        eos = tf.RaggedTensor.from_tensor(tf.fill([chunks.pieces.nrows(), 1], config.eos_id))
        source = tf.identity(tf.concat([chunks.pieces, eos], axis=1).to_tensor())
    alternative = tf.fill(tf.shape(sentences), -1)
    blank = lambda t: tf.equal(tf.strings.length(tf.strings.strip(t)), 0)  # noqa: E731
    idle = blank(sentences) & blank(prefix) & tf.equal(wanted.row_lengths(), 0)  # nothing to do
    # Searches (n,) of the chunks (m,): k for a chunk that takes the alternatives (`first`),
    # one for any other chunk, whose k outputs are the same (`spread`, below).
    searches = tf.where(first, k, 1) if alternatives else tf.ones_like(alternative)  # (m,)
    starts = tf.cumsum(searches, exclusive=True)  # (m,) each chunk's first search
    if alternatives:
        copies = tf.repeat(tf.range(tf.shape(sentences)[0]), searches)  # (n,) chunk of each
        repeat = lambda t: tf.gather(t, copies)  # noqa: E731  # (n, ...), ragged too
        source, forced, first_allowed = repeat(source), repeat(forced), repeat(first_allowed)
        wanted_ids, avoid_ids, head_ids = repeat(wanted_ids), repeat(avoid_ids), repeat(head_ids)
        unspellable = repeat(unspellable)
        ranks = tf.range(tf.shape(copies)[0]) - tf.gather(starts, copies)  # (n,) 0..k-1
        alternative = tf.where(repeat(first), ranks, -1)
        prefix, idle = repeat(prefix), repeat(idle)
    guide = Guide.build(tf.shape(source)[0], config.vocab_size, prefix_ids=forced,
                        first_allowed=first_allowed, alternative=alternative,
                        avoid=avoid_ids, constraints=wanted_ids)  # fmt: skip
    ids, scores = guided_ids(translator.model, source, translator.options, guide,
                             translator.pad_kernels, word_boundaries(pieces), prefill)  # fmt: skip
    ids, scores = ids[:, 0], scores[:, 0]  # (n,)
    met = phrases_met(ids, guide.constraints) & ~unspellable
    texts = tokenizer.detokenize(ids)
    texts = attach_prefix(prefix, texts[:, None], tokenizer.detokenize(head_ids.to_tensor()))
    texts = tf.where(scores > float("-inf"), texts[:, 0], "")  # no such alternative: ""
    # An empty sentence with nothing to force translates to "" with score 0, as in the plain
    # path (`decoding.documents`), whatever the search made of it.
    texts = tf.where(idle, "", texts)
    scores = tf.where(idle, 0.0, scores)
    met = met | idle
    texts, scores, met = [spread(t, starts, searches, k) for t in (texts, scores, met)]
    order = tf.argsort(scores, axis=1, direction="DESCENDING", stable=True)
    take = lambda t: tf.gather(t, order, batch_dims=1)  # noqa: E731
    return take(texts), take(scores), take(met)


def spread(results, starts, searches, k: int) -> tf.Tensor:
    """Per-search `results (n,)`, `searches (m,)` consecutive searches per chunk (k or 1)
    from `starts (m,)` on -> `(m, k)`: a chunk's k searches side by side, or its one search
    k times."""
    offsets = tf.minimum(tf.range(k)[None, :], searches[:, None] - 1)  # (m, k)
    return tf.gather(results, starts[:, None] + offsets)  # (m, k)


def guided_function(translator, alternatives: int = 0, limits: GuideLimits | None = None,
                    prefill: bool = True):  # fmt: skip
    """`translate_guided` as one `tf.function` of five string `(batch,)` tensors (text, prefix,
    constraints, avoid, glossary), traced once: for repeated eager calls and for export."""
    spec = tf.TensorSpec([None], tf.string)
    return graph_function(
        lambda text, prefix, constraints, avoid, glossary: translate_guided(
            translator, text, prefix, constraints, avoid, glossary, alternatives, limits, prefill
        ),
        input_signature=[spec] * 5,
    )
