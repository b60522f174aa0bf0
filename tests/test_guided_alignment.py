"""Guided alignment (`training/guided_alignment.py`, `data/alignment_corpus.py`): the gold
rows against a Python reference, grow-diag-final-and on a hand-worked case, the loss term
against NumPy on a tiny model, the term falling while training, identical losses when off,
and the training input and eflomal end to end."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import TransformerConfig, build_transformer
from keras_transformer.data import alignment_corpus as ac
from keras_transformer.training import guided_alignment as ga

PAD, EOS = 0, 2


def _gold_reference(lines, source, labels, starts):
    """Loops over pieces: row t lists the source pieces whose word is linked to t's word."""

    def words(row):
        out, word = [], -1
        for piece in row:
            if piece in (PAD, EOS):
                out.append(-1)
                continue
            word += int(starts[piece]) or int(word < 0)
            out.append(word)
        return out

    gold = np.zeros(labels.shape + (source.shape[1],), np.float32)
    for b, line in enumerate(lines):
        links = ac.parse_line(line)
        source_words, target_words = words(source[b]), words(labels[b])
        for t, j in enumerate(target_words):
            for s, i in enumerate(source_words):
                gold[b, t, s] = float(j >= 0 and i >= 0 and (i, j) in links)
        totals = gold[b].sum(axis=1, keepdims=True)
        gold[b] = np.divide(gold[b], totals, out=np.zeros_like(gold[b]), where=totals > 0)
    return gold


def test_gold_matrix_maps_word_links_to_pieces(rng):
    starts = rng.integers(0, 2, size=12).astype(np.int32)
    source = rng.integers(3, 12, size=(3, 7)).astype(np.int32)
    labels = rng.integers(3, 12, size=(3, 6)).astype(np.int32)
    source[0, 5:] = [EOS, PAD]
    labels[1, 3:] = [EOS, PAD, PAD]
    lines = ["0-0 1-2 1-1 2-0", "", "3-1 0-0 9-9 0-3"]  # 9-9: beyond the words, dropped
    got = ac.gold_matrix(tf.constant(lines), source, labels, starts, PAD, EOS).numpy()
    np.testing.assert_allclose(got, _gold_reference(lines, source, labels, starts), atol=1e-6)
    assert got.sum() > 0


def test_grow_diag_final_and_on_a_hand_worked_case():
    forward = {(0, 0), (1, 1), (2, 1), (5, 0)}
    reverse = {(0, 0), (1, 1), (1, 2), (4, 4)}
    # Intersection {0-0, 1-1}; grown: 2-1 (source 2 free) and 1-2 (target 2 free), both next
    # to 1-1; 5-0 is not next to a link and target 0 is taken; 4-4: both words free (final-and).
    expected = {(0, 0), (1, 1), (2, 1), (1, 2), (4, 4)}
    assert ac.grow_diag_final_and(forward, reverse) == expected
    assert ac.moses_line(expected) == "0-0 1-1 1-2 2-1 4-4"
    assert ac.parse_line("0-0 1-1 1-2 2-1 4-4") == expected
    with pytest.raises(ValueError, match="pair='1:2'"):
        ac.parse_line("0-0 1:2")


def _tiny(seed=0, **kwargs):
    config = TransformerConfig.tiny(
        24, num_layers=2, d_model=16, d_ff=32, num_heads=2, dropout=0.0, max_length=16
    )
    tf.keras.utils.set_random_seed(seed)
    return ga.GuidedAlignmentTransformer(config, **kwargs), config


def _batch(rng, batch=3, src_len=6, tgt_len=5):
    source = rng.integers(3, 24, size=(batch, src_len)).astype(np.int32)
    target = rng.integers(3, 24, size=(batch, tgt_len)).astype(np.int32)
    source[0, -2:] = PAD
    target[1, -1:] = PAD
    gold = np.zeros((batch, tgt_len, src_len), np.float32)
    for b in range(batch):
        for t in range(tgt_len - 1):  # the last row unlinked
            gold[b, t, t % (src_len - 2)] = 1.0
    gold[2, 1, :2] = 0.5
    return {"source": source, "target": target, "alignment": gold}


def test_loss_term_equals_numpy_reference(rng):
    model, _ = _tiny(weight=0.7)
    inputs = _batch(rng)
    plain = model({"source": inputs["source"], "target": inputs["target"]})
    logits = model(inputs)  # each call clears the losses of the one before
    np.testing.assert_allclose(np.asarray(logits), np.asarray(plain), atol=1e-5)
    (term,) = model.losses
    attention = model.attention_weights(inputs["source"], inputs["target"])[-1][:, 0]
    log_p = np.log(np.clip(np.asarray(attention), ga.EPSILON, 1.0))
    gold = inputs["alignment"]
    rows = gold.sum(-1) > 0
    expected = 0.7 * (-(gold * log_p).sum(-1))[rows].mean()
    np.testing.assert_allclose(float(term), expected, rtol=1e-5)


def _compile(model, config):
    from keras_transformer.training.losses import MaskedLabelSmoothedCrossEntropy

    model.compile(
        optimizer=tf.keras.optimizers.Adam(3e-3),
        loss=MaskedLabelSmoothedCrossEntropy(0.1, pad_id=config.pad_id),
        run_eagerly=True,  # a traced train step costs tens of seconds here
    )


@pytest.mark.slow  # eager train steps / a tokenized pipeline: tens of seconds
def test_guided_term_falls_while_training(rng):
    model, config = _tiny(weight=1.0)
    _compile(model, config)
    inputs = _batch(rng)
    labels = np.concatenate([inputs["target"][:, 1:], np.full((3, 1), EOS, np.int32)], 1)

    def term():
        _, attention = model.logits_and_attention(inputs["source"], inputs["target"])
        return float(ga.guided_alignment_loss(inputs["alignment"], attention))

    before = term()
    for _ in range(15):
        model.train_on_batch(inputs, labels)
    assert term() < 0.7 * before


@pytest.mark.slow  # eager train steps / a tokenized pipeline: tens of seconds
def test_off_gives_the_same_loss_as_a_plain_transformer(rng):
    """Without alignments the guided model trains as `Transformer` does (same weights, same
    losses), and a run without --guided-alignment builds a plain `Transformer`."""
    from keras_transformer.config import TrainingConfig

    guided, config = _tiny()
    plain = build_transformer(config)
    plain.set_weights(guided.get_weights())
    inputs = _batch(rng)
    x = {"source": inputs["source"], "target": inputs["target"]}
    labels = np.concatenate([x["target"][:, 1:], np.full((3, 1), EOS, np.int32)], 1)
    losses = []
    for model in (guided, plain):
        _compile(model, config)
        losses.append([float(model.train_on_batch(x, labels)) for _ in range(3)])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
    recipe = TrainingConfig.from_flat(model="tiny").recipe
    assert type(ga.build_model(config, recipe)).__name__ == "Transformer"


@pytest.mark.slow  # eager train steps / a tokenized pipeline: tens of seconds
def test_training_input_carries_piece_level_gold_rows(tmp_path):
    """The pipeline turns each pair's line into gold rows over its pieces, equal to the loop
    reference on the batch's own ids; dev-style input without the file has no feature."""
    from keras_transformer.data.pipeline import make_batches
    from keras_transformer.data.tokenizer import SubwordTokenizer, train_sentencepiece
    from keras_transformer.testing.model_dir import SENTENCES

    spm = train_sentencepiece(SENTENCES, str(tmp_path / "spm.model"), vocab_size=60)
    tokenizer = SubwordTokenizer.from_file(spm)
    pairs = [(s, s.upper()) for s in SENTENCES[:12]]
    path = tmp_path / "train.align"
    path.write_text("".join(f"0-0 1-1 {k % 3}-2\n" for k in range(12)))
    data = tf.data.Dataset.from_tensor_slices(
        {"source": [s for s, _ in pairs], "target": [t for _, t in pairs]}
    )
    batches = make_batches(ac.with_alignments(data, str(path)), tokenizer, 32, 256, training=False)
    starts = ac.word_start_table(tokenizer.model_proto)
    seen = 0
    for x, labels in batches:
        lines = [f"0-0 1-1 {k % 3}-2" for k in range(12)]  # every line links words 0, 1, 2
        source = x["source"].numpy()
        reference = _gold_reference(lines[: len(source)], source, labels.numpy(), starts)
        rows = x["alignment"].numpy()
        assert rows.shape == labels.shape + (source.shape[1],)
        linked = rows.sum(-1) > 0
        np.testing.assert_allclose(rows.sum(-1)[linked], 1.0, atol=1e-6)
        np.testing.assert_array_equal(linked[:, :1], reference.sum(-1)[:, :1] > 0)
        seen += len(source)
    assert seen == 12
    plain = make_batches(data, tokenizer, 32, 256, training=False)
    assert "alignment" not in plain.element_spec[0]


@pytest.mark.slow  # eflomal's sampler: seconds
def test_eflomal_aligns_a_monotone_toy_corpus():
    """On a corpus where every word has one translation in the same position, the symmetrized
    alignment is the diagonal (and intersection and union agree with it)."""
    pytest.importorskip("eflomal")
    sources = ["the house is small", "the house is big", "the book", "a book is small"] * 20
    targets = ["das Haus ist klein", "das Haus ist groß", "das Buch", "ein Buch ist klein"] * 20
    lines = {m: ac.symmetrized_lines(sources, targets, m) for m in ac.SYMMETRIZATIONS}
    for k, source in enumerate(sources[:4]):
        found = {m: ac.parse_line(lines[m][k]) for m in lines}
        assert found["intersection"] <= found["grow-diag-final-and"] <= found["union"]
        assert found["intersection"] == {(w, w) for w in range(len(source.split()))}, found
