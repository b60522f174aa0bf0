"""Word alignments from cross-attention (`decoding/alignments.py`), each part against a
NumPy or Python reference: piece-to-word indices, word-level sums and argmax, the Moses
strings, the model's attention and whole inputs against their sentences aligned alone."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import alignments as al


def _piece_words_reference(ids, starts, pad, eos):
    out = np.full(ids.shape, -1)
    for b, row in enumerate(ids):
        word = -1
        for t, piece in enumerate(row):
            if piece in (pad, eos):
                continue
            word += int(starts[piece]) or int(t == 0)
            out[b, t] = word
    return out


def test_piece_words_matches_python(rng):
    starts = rng.integers(0, 2, size=20).astype(np.int32)
    ids = rng.integers(4, 20, size=(5, 9)).astype(np.int32)
    ids[1, 6:] = 0  # padding
    ids[2, 4] = 3  # EOS, then padding
    ids[2, 5:] = 0
    got = al.piece_words(ids, starts, pad_id=0, eos_id=3).numpy()
    np.testing.assert_array_equal(got, _piece_words_reference(ids, starts, 0, 3))


def test_word_links_match_numpy_sums_and_argmax(rng):
    attention = rng.random((3, 6, 7)).astype(np.float32)
    source_words = np.array([[0, 0, 1, 2, 2, 3, -1], [0, 1, 1, -1, -1, -1, -1], [-1] * 7])
    target_words = np.array([[0, 1, 1, 2, -1, -1], [0, 0, 1, 2, 3, -1], [0, 1, -1, -1, -1, -1]])
    got = al.word_links(attention, source_words, target_words).numpy()
    for b in range(3):
        for k in range(got.shape[1]):
            rows = target_words[b] == k
            if not rows.any() or (source_words[b] < 0).all():
                assert got[b, k] == -1
                continue
            sums = [attention[b][rows][:, source_words[b] == j].sum() for j in range(4)]
            assert got[b, k] == int(np.argmax(sums)), (b, k)


def test_moses_strings_with_offsets():
    links = np.array([[2, -1, 0], [-1, -1, -1], [1, 1, 5]], np.int32)
    got = al.moses_strings(links, [0, 3, 10], [1, 0, 4]).numpy().tolist()
    assert got == [b"2-1 0-3", b"", b"11-4 11-5 15-6"]


def test_word_offsets_count_the_words_the_model_reads():
    """A no-break space parts two words for the offsets as for SentencePiece (`align_ids`
    counts words by its pieces), so the next sentence's pairs are shifted by both."""
    texts = tf.constant(["The\u00a0cat sleeps.", "It\u202fis \u200b here.", "Yes."])
    offsets = al.word_offsets(texts, tf.constant([3])).numpy().tolist()
    assert offsets == [0, 3, 6]


def test_alignment_quality_counts_links():
    got = al.alignment_quality(["0-0 1-1 2-1", ""], ["0-0 1-1", "0-0"])
    assert got["precision"] == pytest.approx(2 / 3)
    assert got["recall"] == pytest.approx(2 / 3)
    assert got["aer"] == pytest.approx(1 - 2 / 3)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from keras_transformer import artifacts
    from keras_transformer.testing.model_dir import make_model_dir

    directory = make_model_dir(str(tmp_path_factory.mktemp("align")), max_length=16)
    model, _, tokenizer = artifacts.load_trained(directory)
    return model, tokenizer, al.word_start_table(tokenizer.model_proto)


@pytest.mark.parametrize("row", al.ROWS)
def test_align_tensors_follow_the_models_attention(tiny, row):
    model, tokenizer, starts = tiny
    sources = ["The cat sleeps number 3.", "Der Hund", ""]
    targets = ["Le chat dort.", "The cat sleeps number 12 now.", "Der"]
    out = al.align_tensors(model, tokenizer, sources, targets, starts, layer=0, head=1, row=row)
    for b, (source, target) in enumerate(zip(sources, targets)):  # reference: one pair alone
        src = tokenizer.encode_source(tf.constant([source]), 16).to_tensor().numpy()
        tgt = tokenizer.encode_source(tf.constant([target]), 16).to_tensor().numpy()
        target_in = np.concatenate([[[2]], tgt[:, :-1]], axis=1)
        weights = np.asarray(model.attention_weights(src, target_in, "cross")[0])[0, 1]
        if row == "input":
            weights = np.concatenate([weights[1:], np.zeros_like(weights[:1])])
        sw = _piece_words_reference(src, starts, 0, 3)[0]
        tw = _piece_words_reference(tgt, starts, 0, 3)[0]
        expected = []
        for k in range(tw.max() + 1):
            if sw.max() < 0:
                break
            sums = [weights[tw == k][:, sw == j].sum() for j in range(sw.max() + 1)]
            expected.append(f"{int(np.argmax(sums))}-{k}")
        assert out["alignments"][b].numpy().decode() == " ".join(expected)
        assert len(expected) == (len(target.split()) if source else 0)


@pytest.mark.slow  # traces a beam search: 14 s
def test_whole_inputs_are_their_sentences_aligned_alone(tiny):
    from keras_transformer import SearchOptions
    from keras_transformer.decoding.translator import Translator

    model, tokenizer, starts = tiny
    translator = Translator(model, tokenizer, SearchOptions(beam_size=2, max_extra_length=3))
    texts = ["The cat sleeps. Der Hund schläft.", "  ", "Le chat dort."]
    out = al.translate_with_alignments(translator, tf.constant(texts), starts)
    assert out["translations"].numpy().tolist() == [
        t.encode() for t in translator(texts)
    ]  # the plain path's translations
    first = al.translate_with_alignments(translator, tf.constant(["The cat sleeps."]), starts)
    second = al.translate_with_alignments(translator, tf.constant(["Der Hund schläft."]), starts)
    n_source, n_target = 3, len(first["translations"][0].numpy().split())
    pairs = al.parse_moses(second["alignments"][0].numpy().decode())
    shifted = [f"{i + n_source}-{j + n_target}" for i, j in sorted(pairs, key=lambda p: p[1])]
    expected = " ".join(filter(None, [first["alignments"][0].numpy().decode(), *shifted]))
    assert out["alignments"][0].numpy().decode() == expected
    assert out["alignments"][1].numpy() == b""


def test_a_run_aligns_with_its_guided_head_only_if_it_trained_one(tmp_path):
    import json

    from keras_transformer import artifacts
    from keras_transformer.config import AlignmentOptions

    assert artifacts.run_alignment(str(tmp_path)) == AlignmentOptions()  # no run config
    for guided, want in [(None, AlignmentOptions()), ("train.align", AlignmentOptions.guided())]:
        (tmp_path / artifacts.RUN_CONFIG_FILE).write_text(json.dumps({"guided_alignment": guided}))
        assert artifacts.run_alignment(str(tmp_path)) == want
    assert AlignmentOptions.guided().kwargs() == {"layer": -1, "head": 0, "row": "predict"}
    with pytest.raises(ValueError, match="row='middle'"):
        AlignmentOptions(row="middle")
    with pytest.raises(ValueError, match="head='0'"):
        AlignmentOptions(head="0")


@pytest.mark.slow  # traces a beam search
def test_whole_inputs_read_the_translators_alignment_choice(tiny):
    from keras_transformer import SearchOptions
    from keras_transformer.config import AlignmentOptions
    from keras_transformer.decoding.translator import Translator

    model, tokenizer, starts = tiny
    choice = AlignmentOptions(layer=0, head=1)
    translator = Translator(model, tokenizer, SearchOptions(beam_size=2, max_extra_length=3),
                            alignment=choice)  # fmt: skip
    texts = ["The cat sleeps number 3.", "Der Hund schläft."]
    out = al.translate_with_alignments(translator, tf.constant(texts), starts)
    want = al.align_tensors(model, tokenizer, texts, out["translations"], starts, **choice.kwargs())
    assert out["alignments"].numpy().tolist() == want["alignments"].numpy().tolist()
