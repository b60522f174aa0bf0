"""The export's warm-up records (`keras_transformer.serving.warmup`): an XLA export's records
reach every `(rows, width)` bucket in which the search receives a one-sentence request,
checked through the translate signatures' own segmenting, tokenizing, cutting, batching and
padding, against every sentence length and against random sentences with commas."""

import os
from types import SimpleNamespace

import pytest
import tensorflow as tf

from keras_transformer import DocumentOptions, artifacts
from keras_transformer.constants import EOS_ID
from keras_transformer.data.tokenizer import SubwordTokenizer, train_sentencepiece
from keras_transformer.decoding.documents import (
    piece_table,
    shortest_cut_part,
    translate_documents,
)
from keras_transformer.decoding.search import XLA_WIDTH_MULTIPLE, pad_rows, pad_width
from keras_transformer.serving import warmup
from keras_transformer.serving.signatures import SIGNATURES

pytest.importorskip("tensorflow_serving.apis")

MAX_LENGTH = 64  # make_model_dir's


@pytest.fixture
def tokenizer(one_layer_model_dir):
    return SubwordTokenizer.from_file(os.path.join(one_layer_model_dir, artifacts.TOKENIZER_FILE))


def _bucket(pieces: int) -> int:
    """The XLA source width of a sentence of `pieces` pieces (EOS added)."""
    return -(-(pieces + 1) // XLA_WIDTH_MULTIPLE) * XLA_WIDTH_MULTIPLE


@pytest.mark.parametrize("shortest, longest", [(1, 1), (1, 15), (1, 16), (9, 32), (33, 64)])
def test_source_widths_are_the_widths_of_every_sentence_length(shortest, longest):
    every = {_bucket(pieces) for pieces in range(shortest, longest + 1)}
    assert warmup.source_widths(shortest, longest) == sorted(every)


@pytest.mark.parametrize(
    "documents, max_length, longest",
    [
        (DocumentOptions(), 128, 32),  # a quarter of max_length
        (DocumentOptions(max_segment_pieces=50), 128, 50),
        (DocumentOptions(max_segment_pieces=500), 128, 127),  # EOS must still fit
        (DocumentOptions.sentences(), 128, 127),  # truncated at max_length - 1
        (DocumentOptions(segment=False, overlong="split"), 256, 64),
    ],
)
def test_longest_segment_is_what_the_documents_options_send(documents, max_length, longest):
    assert warmup.longest_segment(documents, max_length) == longest


def _shapes_sent(tokenizer, requests, documents) -> list[list[tuple]]:
    """The `(rows, width)` buckets each request (a list of texts) reaches the XLA search with,
    as the translate signatures segment, tokenize, cut, batch and pad it
    (`translate_documents`, then the translator's `pad_width` and `pad_rows`)."""
    shapes = []

    def run(source, _):
        shapes[-1].append(tuple(pad_rows(pad_width(source, XLA_WIDTH_MULTIPLE)).shape))
        rows = tf.shape(source)[0]
        return tf.fill([rows, 1], ""), tf.zeros([rows, 1])

    ranks = piece_table(tokenizer.model_proto)
    for texts in requests:
        shapes.append([])
        translate_documents(
            tf.constant(texts), tokenizer.tokenize, run, documents, MAX_LENGTH, ranks, EOS_ID
        )
    return shapes


def _random_sentences(tokenizer, rng, count: int, most_pieces: int) -> list[str]:
    """`count` sentences of words from the test corpus's vocabulary (some of several pieces),
    commas scattered in, no sentence end, each of at most `most_pieces` pieces."""
    words = ["The", "cat", "sleeps", "Der", "Hund", "schläft", "Le", "chat", "dort", "number"]
    words += [str(i) for i in range(40)] + ["unbekannt", "Katzenfutter"]
    sentences = []
    while len(sentences) < count:
        size = int(rng.integers(1, most_pieces + 1))
        picked = [str(w) + ("," if rng.random() < 0.15 else "") for w in rng.choice(words, size)]
        text = " ".join(picked)
        if int(tokenizer.tokenize(tf.constant([text])).row_lengths()[0]) <= most_pieces:
            sentences.append(text)
    return sentences


@pytest.mark.parametrize("max_segment_pieces", [10, 15, 16, 31])
def test_width_requests_reach_every_bucket_of_a_one_sentence_request(
    tokenizer, rng, max_segment_pieces
):
    documents = DocumentOptions(max_segment_pieces=max_segment_pieces)
    requests = warmup.width_requests(tokenizer, max_segment_pieces, cut=True)
    assert requests, "the test vocabulary has words of one piece"
    warmed = _shapes_sent(tokenizer, requests, documents)
    assert warmed == [[shape] for shape in warmup.width_shapes(max_segment_pieces, True)]
    warmed = {shape for shapes in warmed for shape in shapes}
    # Independent: every length up to the limit (one row each) ...
    single = {(1, _bucket(pieces)) for pieces in range(1, max_segment_pieces + 1)}
    assert single <= warmed
    # ... and random sentences cut into at most 4 parts (each part but the last holds at
    # least shortest_cut_part pieces), cut where the cutter cuts.
    most = 4 * shortest_cut_part(max_segment_pieces)
    sentences = _random_sentences(tokenizer, rng, 60, most)
    sent = {shape for shapes in _shapes_sent(tokenizer, [[s] for s in sentences], documents)
            for shape in shapes}  # fmt: skip
    assert {rows for rows, _ in sent} == {1, 2, 4}  # the sample reaches the cut buckets
    assert sent <= warmed, sorted(sent - warmed)


def test_without_cutting_the_requests_reach_every_width_up_to_max_length(tokenizer):
    documents = DocumentOptions.sentences()  # truncate: one row, up to max_length - 1 pieces
    longest = warmup.longest_segment(documents, MAX_LENGTH)
    requests = warmup.width_requests(tokenizer, longest, cut=False)
    every = {(1, _bucket(pieces)) for pieces in range(1, longest + 1)}
    assert [s for shapes in _shapes_sent(tokenizer, requests, documents) for s in shapes] == (
        sorted(every)
    )


def test_no_width_requests_for_a_vocabulary_without_words(tmp_path):
    path = str(tmp_path / "digits.model")
    train_sentencepiece([f"{i} , {i * 7} ; {i % 13}" for i in range(300)], path, vocab_size=40)
    digits = SubwordTokenizer.from_file(path)
    assert warmup.one_piece_word(digits) is None
    assert warmup.width_requests(digits, 40, cut=True) == []


def test_warmup_requests_add_each_width_request_for_each_width_signature():
    texts, widths = ("One.", "Two words."), (["a " * 15], ["a " * 31] * 2)
    width_signatures = warmup.WIDTH_SIGNATURES["all"]
    logs = warmup.warmup_requests("m", texts, SIGNATURES, widths, width_signatures)
    requests = [log.predict_log.request for log in logs]
    plain = len(SIGNATURES) * (len(texts) + 1)  # each text alone, then all in one batch
    assert len(requests) == plain + len(width_signatures) * len(widths)
    added = [
        (r.model_spec.signature_name, tf.make_ndarray(r.inputs["text"]).tolist())
        for r in requests[plain:]
    ]
    want = [(name, [t.encode() for t in batch]) for name in width_signatures for batch in widths]
    assert added == want
    assert len(warmup.warmup_requests("m", texts, SIGNATURES)) == plain


def _module(jit_compile: bool, tokenizer, documents=None, n_best=4):
    translator = SimpleNamespace(
        jit_compile=jit_compile,
        documents=documents or DocumentOptions(),
        config=SimpleNamespace(max_length=MAX_LENGTH),
    )
    return SimpleNamespace(translator=translator, tokenizer=tokenizer, n_best=n_best)


def test_width_warmup_only_for_an_xla_export_and_as_chosen(tokenizer):
    requests, names = warmup.width_warmup(_module(True, tokenizer), "all")
    assert names == warmup.WIDTH_SIGNATURES["all"]
    longest = MAX_LENGTH // 4  # DocumentOptions()' limit: 16 pieces, widths 16 and 32
    assert requests == warmup.width_requests(tokenizer, longest, cut=True)
    assert [len(r) for r in requests] == [1, 1, 2, 2, 4, 4]  # parts of 9-16 pieces: both widths
    _, names = warmup.width_warmup(_module(True, tokenizer, n_best=1), "all")
    assert names == ("serving_default", "translate_sample")  # n-best 1: serving_default's search
    requests, names = warmup.width_warmup(_module(True, tokenizer), "serving_default")
    assert names == ("serving_default",) and len(requests) == 6
    sentences = _module(True, tokenizer, DocumentOptions.sentences())
    requests, _ = warmup.width_warmup(sentences, "all")  # no cut
    assert requests == warmup.width_requests(tokenizer, MAX_LENGTH - 1, cut=False)
    assert warmup.width_warmup(_module(True, tokenizer), "none") == ([], ())
    assert warmup.width_warmup(_module(False, tokenizer), "all") == ([], ())
    with pytest.raises(ValueError, match="warm_widths='some'"):
        warmup.width_warmup(_module(True, tokenizer), "some")


def test_warmup_records_stay_within_what_tf_serving_loads():
    widths = [["a " * n] for n in range(1, 600)]  # more than 1000 records over 3 signatures
    names = warmup.WIDTH_SIGNATURES["all"]
    with pytest.warns(UserWarning, match="keeping the first"):
        logs = warmup.warmup_requests("m", ("One.",), SIGNATURES, widths, names)
    assert warmup.MAX_RECORDS - len(names) < len(logs) <= warmup.MAX_RECORDS
    per_signature = (len(logs) - 2 * len(SIGNATURES)) // len(names)  # the narrowest kept
    last = tf.make_ndarray(logs[-1].predict_log.request.inputs["text"]).tolist()
    assert last == [widths[per_signature - 1][0].encode()]
