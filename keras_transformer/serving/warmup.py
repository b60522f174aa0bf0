"""An export's warm-up records: the requests TF Serving replays when it loads a version
(`assets.extra/tf_serving_warmup_requests`), so that live requests do not pay for the work
of a graph's first call.

Every export's records: each signature with each of `WARMUP_TEXTS` alone, then with all of
them in one batch (TensorFlow's graph optimization runs on a signature's first call).

An XLA export (`--jit-compile`) compiles a search once per source width (the sentence's
pieces plus EOS, padded to a multiple of `XLA_WIDTH_MULTIPLE`) and batch bucket, on the
first request of that shape (seconds at base size; benchmarks/results/
2026-11-28-xla-warmup-buckets.md). So its records also hold, for each signature with a
search of its own (`WIDTH_SIGNATURES`), a request for each `(rows, width)` in which the
search receives one sentence (`width_shapes`): alone, at every width a sentence can reach,
and cut into 2 to 4 parts. A request of one sentence of up to 4 times
`documents.shortest_cut_part` pieces (about twice the longest segment: 68 pieces for the
default run's model, 132 at base size) then compiles nothing; the server pays for those
compiles when it loads the version. Longer sentences and requests of several sentences (or
TF Serving's merged batches) may still compile a new bucket on first use (BUILD.md).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

import tensorflow as tf

from keras_transformer.checks import check_choice
from keras_transformer.decoding.documents import shortest_cut_part
from keras_transformer.decoding.search import XLA_WIDTH_MULTIPLE
from keras_transformer.serving.signatures import (
    NBEST_SIGNATURE,
    PAIR_SIGNATURES,
    SIGNATURES,
    WIDTH_SIGNATURES,
    make_predict_request,
)

WARMUP_FILE = "tf_serving_warmup_requests"
WARMUP_TEXTS = (
    "The cat sleeps.",
    "Hello world!",
    "This sentence is a little longer than the others, so that warm-up sees a longer source.",
    "",
)
WORD_PIECE = "\u2581"  # SentencePiece's word-start mark
MAX_RECORDS = 1000  # TF Serving refuses to load a version whose warm-up file holds more


def longest_segment(documents, max_length: int) -> int:
    """The most pieces (EOS not counted) of one sentence that the translate signatures of
    `documents` (`DocumentOptions`) send to a model of `max_length`."""
    if documents.overlong == "truncate":
        return max_length - 1
    return documents.segment_limit(max_length)


def source_widths(shortest: int, longest: int, multiple: int = XLA_WIDTH_MULTIPLE) -> list[int]:
    """The XLA source widths of sentences of `shortest` to `longest` pieces (EOS added,
    padded to a multiple of `multiple`), ascending."""
    first = -(-(shortest + 1) // multiple) * multiple  # ceil((shortest + 1) / multiple) * ...
    last = -(-(longest + 1) // multiple) * multiple
    return list(range(first, last + 1, multiple))


def width_shapes(longest: int, cut: bool, multiple: int = XLA_WIDTH_MULTIPLE) -> list[tuple]:
    """The `(rows, width)` buckets in which the XLA search receives a request of one sentence
    of at most `longest` pieces, and with `cut` (`overlong="split"`) one cut into 2 to 4 parts
    (any sentence of up to 4 times `documents.shortest_cut_part(longest)` pieces): one batch of
    2 or 4 rows (padded to a power of two) as wide as its longest part, which holds more than
    half the limit."""
    shapes = [(1, width) for width in source_widths(1, longest, multiple)]
    if cut:
        parts = source_widths(shortest_cut_part(longest), longest, multiple)
        shapes += [(rows, width) for rows in (2, 4) for width in parts]
    return shapes


def one_piece_words(tokenizer, count: int = 1, candidates: int = 200) -> list[str]:
    """Up to `count` words that `tokenizer` (`SubwordTokenizer`) keeps as one piece, also when
    repeated: the first whole-word alphabetic pieces of the vocabulary that do, among the
    first `candidates` such pieces ([] if none)."""
    pieces = tokenizer.sentencepiece.id_to_string(tf.range(tokenizer.vocab_size)).numpy()
    words = []
    for piece in pieces:
        text = piece.decode("utf-8", errors="replace")
        if text.startswith(WORD_PIECE) and text[1:].isalpha():
            words.append(text[1:])
        if len(words) == candidates:
            break
    found = []
    for word in words:
        three = tokenizer.tokenize(tf.constant([word, " ".join([word] * 3)])).row_lengths()
        if three.numpy().tolist() == [1, 3]:
            found.append(word)
            if len(found) == count:
                break
    return found


def one_piece_word(tokenizer, candidates: int = 200) -> str | None:
    """The first of `one_piece_words`, or None."""
    words = one_piece_words(tokenizer, 1, candidates)
    return words[0] if words else None


def width_requests(
    tokenizer, longest: int, cut: bool = False, multiple: int = XLA_WIDTH_MULTIPLE
) -> list[list[str]]:
    """The texts of one request for each bucket of `width_shapes`: `rows` sentences that fill
    `width` (`min(width - 1, longest)` pieces plus EOS), so the search receives exactly that
    bucket. Each sentence is a word of one piece (`one_piece_words`) repeated, no
    punctuation, so no segmenter splits it, and a different word for each row (a request's
    repeated sentences are searched once); piece counts are checked with `tokenizer`. [] for
    a vocabulary without such a word; a bucket needs as many words as it has rows."""
    shapes = width_shapes(longest, cut, multiple)
    words = one_piece_words(tokenizer, max((rows for rows, _ in shapes), default=1))
    if not words:
        return []
    counts = sorted({min(width - 1, longest) for _, width in shapes})
    texts = {(word, count): " ".join([word] * count) for word in words for count in counts}
    keys = list(texts)
    got = tokenizer.tokenize(tf.constant([texts[k] for k in keys])).row_lengths().numpy()
    fits = {key for key, pieces in zip(keys, got.tolist()) if pieces == key[1]}
    requests = []
    for rows, width in shapes:
        count = min(width - 1, longest)
        row_words = [word for word in words if (word, count) in fits][:rows]
        if len(row_words) == rows:
            requests.append([texts[(word, count)] for word in row_words])
    return requests


def warmup_requests(
    model_name: str,
    texts: Sequence[str] = WARMUP_TEXTS,
    signatures: Sequence[str] = SIGNATURES,
    widths: Sequence[Sequence[str]] = (),
    width_signatures: Sequence[str] = (),
) -> list:
    """`PredictionLog`s for every signature of `signatures`: each text alone, then all texts
    in one batch (`score`: each text scored as its own target; `translate_sample`: default
    knobs; the guided signatures: no guide); then each request of `widths` (`width_requests`)
    for each of `width_signatures`."""
    from tensorflow_serving.apis import prediction_log_pb2

    batches = [[t] for t in texts if t] + [list(texts)]
    plan = [(signature, batch) for signature in signatures for batch in batches]
    room = (MAX_RECORDS - len(plan)) // max(len(width_signatures), 1)
    if len(widths) > room:  # a long max_length without cutting: keep the narrowest widths
        warnings.warn(
            f"{len(widths)} width warm-up requests a signature would pass TF Serving's "
            f"{MAX_RECORDS} warm-up records: keeping the first {max(room, 0)}; wider "
            "requests compile on first use",
            stacklevel=2,
        )
        widths = widths[: max(room, 0)]
    plan += [(signature, list(batch)) for signature in width_signatures for batch in widths]
    logs = []
    for signature, batch in plan:
        targets = batch if signature in PAIR_SIGNATURES else None
        request = make_predict_request(batch, model_name, signature, targets=targets)
        log = prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request)
        )
        logs.append(log)
    return logs


def width_warmup(module, warm_widths: str = "all") -> tuple[list[list[str]], tuple[str, ...]]:
    """`(requests, signatures)`: the width requests (`width_requests`) and the signatures
    that replay them for the export of `module` (`TranslationModule`); none unless its
    translator runs under XLA. `warm_widths`: a key of `WIDTH_SIGNATURES`."""
    check_choice("warm_widths", warm_widths, tuple(WIDTH_SIGNATURES))
    translator = module.translator
    if not getattr(translator, "jit_compile", False) or warm_widths == "none":
        return [], ()
    documents = translator.documents
    longest = longest_segment(documents, translator.config.max_length)
    cut = documents.overlong == "split"
    names = WIDTH_SIGNATURES[warm_widths]
    if module.n_best == 1:  # translate_nbest then runs serving_default's search
        names = tuple(name for name in names if name != NBEST_SIGNATURE)
    return width_requests(module.tokenizer, longest, cut), names


def write_warmup_file(
    export_dir: str,
    model_name: str,
    texts=WARMUP_TEXTS,
    signatures: Sequence[str] = SIGNATURES,
    widths: Sequence[Sequence[str]] = (),
    width_signatures: Sequence[str] = (),
) -> str:
    """Write `assets.extra/tf_serving_warmup_requests` (a TFRecord of PredictionLog protos:
    `warmup_requests`)."""
    extra = os.path.join(export_dir, "assets.extra")
    tf.io.gfile.makedirs(extra)
    path = os.path.join(extra, WARMUP_FILE)
    with tf.io.TFRecordWriter(path) as writer:
        for log in warmup_requests(model_name, texts, signatures, widths, width_signatures):
            writer.write(log.SerializeToString())
    return path
