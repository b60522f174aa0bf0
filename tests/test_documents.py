"""Whole inputs (keras_transformer.decoding.documents and Translator): the overlong cut
against a plain-Python greedy reference, the assembly of segments and chunks against Python
string work (with a stand-in search), and on a small model: a document translates to its
sentences' translations one by one, joined; n-best and scores of documents; the truncate
option; limits and hostile inputs."""

from __future__ import annotations

import html
import logging
import re

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import DocumentOptions, SearchOptions, artifacts
from keras_transformer.data.segmenter import segment, split_sentences
from keras_transformer.decoding import Translator
from keras_transformer.decoding.documents import cut_lengths, piece_table, translate_documents
from keras_transformer.decoding.scoring import score_document_tensors, score_tensors
from keras_transformer.tracing import graph_function

SEARCH = SearchOptions(beam_size=3, max_extra_length=6)
PARAGRAPH = (
    "The cat sleeps number 3. Der Hund schläft number 12. Le chat dort number 7.\n"
    "  The cat sleeps.\n\nDer Hund schläft number 30. Le chat dort number 1."
)


def reference_cut(ranks: list[tuple[int, int]], limit: int) -> list[int]:
    """The chunk lengths `cut_lengths` must give, by plain Python: greedy from the start,
    each cut in the second half of the window, best rank (2 x clause end before the cut +
    word start after it), latest first."""
    n, start, chunks = len(ranks), 0, []
    while True:
        if n - start <= limit:
            chunks.append(n - start)
            return chunks
        half = limit // 2
        window = range(start + half + 1, start + limit + 1)

        def key(p):
            return (2 * ranks[p - 1][0] + ranks[p][1], p)

        end = max(window, key=key)
        chunks.append(end - start)
        start = end


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 8])
def test_cut_lengths_matches_python_reference(limit):
    rng = np.random.default_rng(limit)
    vocab = 20
    table = rng.integers(0, 2, (vocab, 2)).astype(np.int32)  # [clause end, word start]
    rows = [rng.integers(1, vocab, n).tolist() for n in [0, 1, limit, limit + 1, 17, 40]]
    got = cut_lengths(tf.ragged.constant(rows, tf.int32), limit, tf.constant(table)).to_list()
    for row, lengths in zip(rows, got):
        want = reference_cut([tuple(table[i]) for i in row], limit) if row else [0]
        assert lengths == want, (row, limit)
        assert sum(lengths) == len(row) and max(lengths) <= limit


def test_cut_lengths_without_long_rows_skips_the_loop_with_the_same_chunks():
    # No row over the limit takes the fast branch; a batch with one long row takes the loop:
    # both give the reference's chunks, eagerly and traced, and no rows give none.
    rng = np.random.default_rng(0)
    table = rng.integers(0, 2, (20, 2)).astype(np.int32)
    short = [rng.integers(1, 20, n).tolist() for n in [0, 1, 4, 8]]
    traced = graph_function(lambda pieces: cut_lengths(pieces, 8, table))
    for rows in (short, short + [rng.integers(1, 20, 19).tolist()]):
        want = [reference_cut([tuple(table[i]) for i in row], 8) if row else [0] for row in rows]
        for cut in (lambda pieces: cut_lengths(pieces, 8, table), traced):
            assert cut(tf.ragged.constant(rows, tf.int32)).to_list() == want
    none = tf.ragged.constant([[1]], tf.int32)[:0]
    assert cut_lengths(none, 8, table).to_list() == []


def test_cut_prefers_comma_then_word_start():
    # ids: 1 plain piece, 2 "," piece (clause end), 3 word start
    table = tf.constant([[0, 0], [0, 0], [1, 0], [0, 1]], tf.int32)
    # limit 8: the first cut falls at 5..8. A comma piece at 4, words start at 5 and 7.
    row = [3, 1, 1, 1, 2, 3, 1, 3, 1, 1]
    assert cut_lengths(tf.ragged.constant([row]), 8, table).to_list() == [[5, 5]]
    no_comma = [3, 1, 1, 1, 1, 3, 1, 3, 1, 1]  # the latest word start wins
    assert cut_lengths(tf.ragged.constant([no_comma]), 8, table).to_list() == [[7, 3]]
    no_word = [1] * 10  # anywhere: the latest
    assert cut_lengths(tf.ragged.constant([no_word]), 8, table).to_list() == [[8, 2]]


def fake_tokenize(texts):
    """Each character is a piece, ids 10 + its byte value (no model needed)."""
    return tf.strings.unicode_decode(texts, "UTF-8") + 10


def fake_run(ids, batch_index):
    """A stand-in search: the k-th of 2 "translations" of a chunk is its characters
    upper-cased with k appended; score = -(pieces) - k."""
    text = tf.strings.upper(
        tf.strings.unicode_encode(tf.ragged.boolean_mask(ids, ids > 3) - 10, "UTF-8")
    )
    length = tf.cast(tf.reduce_sum(tf.cast(ids > 3, tf.int32), axis=1), tf.float32)
    texts = tf.stack([text + "#0", text + "#1"], axis=1)
    return texts, tf.stack([-length, -length - 1.0], axis=1)


def python_reference(text: str, limit: int) -> tuple[list[str], list[float]]:
    """What `translate_documents` must return for `fake_run`, by Python string work over the
    segmenter's output (tests/test_segmenter.py checks the segmenter itself)."""
    seg = segment(tf.constant([text]))
    segments = [s.decode() for s in seg.segments[0].numpy()]
    separators = [s.decode() for s in seg.separators[0].numpy()] + [""]
    outs, scores = [], []
    for k in range(2):
        parts, total = [], 0.0
        for sentence, separator in zip(segments, separators):
            chunks = [sentence[i : i + limit] for i in range(0, len(sentence), limit)]
            parts.append(" ".join(c.upper() + f"#{k}" for c in chunks) + separator)
            total += sum(-len(c) - k for c in chunks)
        outs.append("".join(parts))
        scores.append(total)
    return outs, scores


def test_translate_documents_assembles_like_python():
    limit = 8  # every piece a character, no word starts: fixed-width chunks
    texts = ["  Ab cd. Efgh ijkl mnop qrst.\n\nU.", "", "One.", "\t", "xy. Zz"]
    options = DocumentOptions(max_segment_pieces=limit, batch_size=2)
    ranks = tf.zeros([400, 3], tf.int32)
    empty, _ = translate_documents(["", " "], fake_tokenize, fake_run, options, 64, ranks, 3, 2)
    assert empty.numpy().tolist() == [[b"", b""], [b" ", b" "]]  # no search at all
    got, scores = translate_documents(texts, fake_tokenize, fake_run, options, 64, ranks, 3, 2)
    for row, text in enumerate(texts):
        want, want_scores = python_reference(text, limit)
        assert [t.decode() for t in got[row].numpy()] == want, text
        np.testing.assert_allclose(scores[row].numpy(), want_scores)


def test_sentences_with_nothing_to_read_come_back_as_they_are():
    def tokenize(texts):  # characters past U+2000 are unknown (id 1)
        points = tf.strings.unicode_decode(texts, "UTF-8")
        return tf.where(points > 0x2000, 1, points + 10)

    table = np.zeros([0x2000 + 10, 3], np.int32)
    table[10:, 2] = [chr(c).isalnum() for c in range(0x2000)]  # writes a letter or digit
    texts = ["👍", "Ab cd. 你好 世界! Ef.", "ok 👍", "👍 ! 🙂", "", "\n 👍\n", "Ab cd."]
    options = DocumentOptions(max_segment_pieces=8, batch_size=2)
    got, scores = translate_documents(texts, tokenize, fake_run, options, 64, table, 3, 2)
    for row, text in enumerate(texts):
        seg = segment(tf.constant([text]))
        segments = [x.decode() for x in seg.segments[0].numpy()]
        readable = [any(c.isalnum() and ord(c) <= 0x2000 for c in x)
                    or all(ord(c) <= 0x2000 for c in x) for x in segments]  # fmt: skip
        if all(readable):  # searched as usual; the stand-in writes no unknown piece
            want, want_scores = python_reference(text, 8)
            want = [re.sub("[^\x00-\u2000]", "", w) for w in want]
            unknown = sum(ord(c) > 0x2000 for c in "".join(segments))  # scored as no piece
            want_scores = [score + unknown for score in want_scores]
            assert [t.decode() for t in got[row].numpy()] == want, text
            np.testing.assert_allclose(scores[row].numpy(), want_scores)
        else:
            for k in range(2):  # each unreadable sentence as it is, with score 0
                out = got[row, k].numpy().decode()
                assert [x in out for x, ok in zip(segments, readable) if not ok], text
            if not any(readable):
                assert got[row].numpy().tolist() == [text.encode()] * 2, text
                assert scores[row].numpy().tolist() == [0.0, 0.0]
    assert got[2, 0].numpy().decode() == "OK #0"  # "ok 👍": a letter to read, searched


@pytest.fixture
def translator(one_layer_model_dir):
    model, _, tokenizer = artifacts.load_trained(one_layer_model_dir)
    return Translator(model, tokenizer, SEARCH)


def one_by_one(translator, sentences):
    alone = Translator(
        translator.model, translator.tokenizer, SEARCH, documents=DocumentOptions.sentences()
    )
    return [alone([s], return_scores=True) for s in sentences]


def test_document_is_its_sentences_translated_one_by_one(translator):
    segments = split_sentences(PARAGRAPH)
    assert len(segments) == 6 and segments[3] == "The cat sleeps."
    singles = one_by_one(translator, segments)
    out, score = translator([PARAGRAPH], return_scores=True)
    expected = PARAGRAPH
    for sentence, (text, _) in zip(segments, singles):  # replace each sentence in place
        expected = expected.replace(sentence, "\0" + text[0], 1)
    assert out[0] == expected.replace("\0", "")
    assert score[0] == pytest.approx(sum(s[0] for _, s in singles), abs=1e-3)


def test_document_n_best_joins_each_sentences_kth_best(translator):
    text = "The cat sleeps number 3. Der Hund schläft number 12."
    first, second = split_sentences(text)
    nbest, scores = translator([text], n_best=3, return_scores=True)
    parts, part_scores = translator([first, second], n_best=3, return_scores=True)
    assert nbest[0] == [f"{a} {b}" for a, b in zip(*parts)]
    np.testing.assert_allclose(scores[0], np.sum(part_scores, axis=0), atol=1e-3)
    assert scores[0] == sorted(scores[0], reverse=True)


def test_greedy_document_equals_greedy_sentences(translator):
    text = "Le chat dort number 7. The cat sleeps number 3.\nDer Hund."
    out, _ = translator.sample([text], method="greedy")
    parts, _ = translator.sample(split_sentences(text), method="greedy")
    assert out[0] == f"{parts[0]} {parts[1]}\n{parts[2]}"


def test_long_sentence_is_cut_and_translated_whole(translator):
    long = " ".join(f"cat {i} sleeps" for i in range(400))  # ~1200 pieces, no punctuation
    limit = translator.documents.segment_limit(translator.config.max_length)
    pieces = translator.tokenizer.tokenize(tf.constant([long]))
    lengths = cut_lengths(pieces, limit, piece_table(translator.tokenizer.model_proto))[0]
    assert len(lengths) > 10 and max(lengths.numpy()) <= limit
    bounds = np.cumsum([0] + lengths.numpy().tolist())
    chunks = [pieces[0, a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    texts = [translator.tokenizer.sentencepiece.detokenize(c).numpy().decode() for c in chunks]
    out = translator([long])[0]
    singles = [t[0][0] for t in one_by_one(translator, texts)]
    assert out == " ".join(singles)
    assert len(out) >= 0.5 * len(" ".join(singles))


def test_truncate_option_keeps_the_old_behaviour(translator, caplog):
    old = Translator(
        translator.model, translator.tokenizer, SEARCH, documents=DocumentOptions.sentences()
    )
    long = "Der Hund schläft number 7. " * 30  # over max_length=64 pieces
    max_length = translator.config.max_length
    prefix = translator.tokenizer.tokenize(tf.constant([long]))[:, : max_length - 1]
    prefix_text = translator.tokenizer.sentencepiece.detokenize(prefix).numpy()[0].decode()
    with caplog.at_level(logging.WARNING, logger="keras_transformer"):
        assert old([long]) == old([prefix_text])
        old([long])
    assert sum("truncated" in r.getMessage() for r in caplog.records) == 1  # once
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="keras_transformer"):
        whole = translator([long])[0]
    assert not caplog.records and len(split_sentences(long)) == 31
    assert len(whole) > len(old([long])[0])


def test_input_over_the_byte_limit_is_refused_with_the_limit_named(one_layer_model_dir):
    model, _, tokenizer = artifacts.load_trained(one_layer_model_dir)
    small = Translator(model, tokenizer, SEARCH, documents=DocumentOptions(max_input_bytes=50))
    assert len(small(["x" * 50])) == 1
    with pytest.raises(tf.errors.InvalidArgumentError, match="(?s)max_input_bytes=50.*51"):
        small(["short", "x" * 51])


def test_hostile_inputs_get_answers(translator):
    hostile = ["", "   \t ", "...!?", "😀 ça va?", "\x1f\x1f", "Ok.\n\n\n"]
    out, scores = translator(hostile, return_scores=True)
    assert out[:2] == ["", "   \t "] and scores[:2] == [0.0, 0.0]  # nothing to translate
    assert out[5].endswith("\n\n\n") and len(out) == len(hostile)
    unreadable = ["👍", "ᚠᚢᚦ ᚨ!", "The cat. 👍 👍\n"]  # unknown pieces, nothing else to read
    out, scores = translator(unreadable, return_scores=True)
    assert out[:2] == unreadable[:2] and scores[:2] == [0.0, 0.0]
    assert out[2] == translator(["The cat."])[0] + " 👍 👍\n"  # the first sentence searched
    raw = translator.translate_tensors(tf.constant([b"\xff\xfe\xf0\x9f\x91\x8d!"]))
    assert raw["translations"].numpy()[0].decode("utf-8") == "\ufffd\ufffd👍!"  # valid UTF-8
    raw = translator.translate_tensors(tf.constant([b"\xff\xfe caf\xc3 \x80. Ok"]))
    assert raw["translations"].shape == [1]
    rng = np.random.default_rng(0)
    words = ["The cat sleeps.", "Der Hund", "number 7.", "", "\n", "Le chat dort,"]
    batch = [" ".join(rng.choice(words, rng.integers(0, 12))) for _ in range(512)]
    got, got_scores = translator.translate(batch, batch_size=128)
    assert len(got) == 512 and all(np.isfinite(got_scores))
    for text, translation in zip(batch, got):
        assert translation.count("\n") == text.count("\n")


def test_document_score_sums_aligned_sentence_pairs(translator):
    model, tokenizer, alpha = translator.model, translator.tokenizer, SEARCH.alpha
    sources = ["The cat sleeps. Der Hund schläft number 3.\nLe chat.", "One two.", "", "A b. C d."]
    targets = ["Die Katze. Der Hund!\nLe chat dort.", "Eins zwei.", "", "Merged into one"]
    got = score_document_tensors(model, tokenizer, sources, targets, alpha)
    pairs = [
        (["The cat sleeps.", "Der Hund schläft number 3.", "Le chat."],
         ["Die Katze.", "Der Hund!", "Le chat dort."]),
        (["One two."], ["Eins zwei."]),
        ([], []),  # empty source and target: 0
        (["A b. C d."], ["Merged into one"]),  # 2 segments against 1: scored whole
    ]  # fmt: skip
    for row, (source_part, target_part) in enumerate(pairs):
        if not source_part:
            assert [float(got[k][row]) for k in ("log_prob", "score")] == [0.0, 0.0]
            continue
        want = score_tensors(model, tokenizer, source_part, target_part, alpha)
        tokens = tokenizer.tokenize(tf.constant(target_part)).row_lengths() + 1
        log_prob = float(tf.reduce_sum(want["log_prob"]))
        assert float(got["log_prob"][row]) == pytest.approx(log_prob, abs=1e-4)
        assert float(got["score"][row]) == pytest.approx(
            float(tf.reduce_sum(want["score"])), abs=1e-4
        )
        per_token = log_prob / float(tf.reduce_sum(tokens))
        assert float(got["per_token"][row]) == pytest.approx(per_token, abs=1e-5)


def test_repeated_sentences_are_searched_once_unless_sampling():
    texts = ["Ab cd. Ab cd. Ef.", "Ef.", "Ab cd.", "Gh ij kl mn op qr."]
    options = DocumentOptions(max_segment_pieces=8, batch_size=2)
    ranks = tf.zeros([400, 3], tf.int32)
    for unique, searched in ((True, 5), (False, 8)):  # distinct: "Ab cd.", "Ef.", 3 chunks
        rows = []

        def counting_run(ids, batch_index, rows=rows):
            rows.append(int(ids.shape[0]))
            return fake_run(ids, batch_index)

        got, scores = translate_documents(texts, fake_tokenize, counting_run, options, 64, ranks,
                                          3, 2, unique)  # fmt: skip
        assert sum(rows) == searched, unique
        for row, text in enumerate(texts):
            want, want_scores = python_reference(text, 8)
            assert [t.decode() for t in got[row].numpy()] == want, text
            np.testing.assert_allclose(scores[row].numpy(), want_scores)


def test_repeated_sentences_in_a_batch_translate_as_alone(translator):
    sentence = "The cat sleeps number 3."
    texts = [sentence, f"{sentence} {sentence}", "Der Hund schläft.", sentence]
    out, scores = translator(texts, return_scores=True)
    alone, alone_score = one_by_one(translator, [sentence])[0]
    assert out[0] == out[3] == alone[0] and out[1] == f"{alone[0]} {alone[0]}"
    assert scores[0] == pytest.approx(alone_score[0], abs=1e-4)
    assert scores[1] == pytest.approx(2 * alone_score[0], abs=1e-4)
    tagged = [f"<b>{sentence}</b>", f'<img alt="{sentence}"> {sentence}', f"<b>{sentence}</b>"]

    def markup(texts):
        return translator.translate_markup_tensors(tf.constant(texts))["translations"].numpy()

    marked, plain = markup(tagged), markup([sentence])[0].decode()
    assert marked[0] == marked[2] == markup(tagged[:1])[0]
    assert marked[1] == markup(tagged[1:2])[0]
    assert html.unescape(re.search(r'alt="([^"]*)"', marked[1].decode()).group(1)) == plain
