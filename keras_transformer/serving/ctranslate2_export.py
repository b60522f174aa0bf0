"""Export to CTranslate2, the C++ inference engine, for the fastest CPU (and GPU) decoding.

    export_ctranslate2_run("runs/en_de", "runs/en_de_ct2", quantization="int8")
    # -> runs/en_de_ct2/{model.bin, config.json, shared_vocabulary.json, spm.model}

    import ctranslate2, sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file="runs/en_de_ct2/spm.model")
    translator = ctranslate2.Translator("runs/en_de_ct2", device="cpu")
    from keras_transformer.data.tokenizer import remove_invisible_text  # as our graph reads
    pieces = sp.encode([remove_invisible_text("Hello world.")], out_type=str)  # no EOS: the
    # model config adds it
    results = translator.translate_batch(
        pieces, beam_size=4, length_penalty=0.6, min_decoding_length=0,
        max_input_length=256, max_decoding_length=256,  # both at most config.max_length
    )
    sp.decode(results[0].hypotheses[0])

Command line: `python export/to_ctranslate2.py --model-dir DIR --output-dir OUT`.

What maps to what (a `ctranslate2.specs.TransformerSpec`):

    token/source embedding (vocab, d_model)    decoder.embeddings / encoder.embeddings_0,
        times sqrt(d_model)                    scale_embeddings = True
    positions (sinusoidal or learned)          position_encodings.encodings: the learned
                                               table, or our sinusoids for positions
                                               0..max_length-1 (CTranslate2's own put all
                                               sines first; ours interleave sin and cos)
    W_Q, W_K, W_V (self-attention)             linear_0 = [W_Q; W_K; W_V]^T, with biases
    W_Q / W_K, W_V (encoder-decoder)           linear_0 = W_Q^T, linear_1 = [W_K; W_V]^T
    W_O                                        linear_2 (cross) / linear_1 (self)
    FFN W1, W2                                 ffn.linear_0, ffn.linear_1 (ReLU)
    attention_norm, cross_attention_norm,      self_attention.layer_norm, attention.layer_norm,
        feed_forward_norm                      ffn.layer_norm (pre- or post-norm: pre_norm)
    final_norm (pre-norm only)                 encoder.layer_norm, decoder.layer_norm
    pre-softmax projection x E^T (no bias)     decoder.projection = the token embedding
    layer_norm_epsilon, special ids            config.json (<unk>, <s>, </s>; add_source_eos)

Keras kernels are `(in, out)`, CTranslate2 weights `(out, in)`; heads are contiguous blocks of
d_k columns in both. CTranslate2 has no padding token: it masks by lengths, so `<pad>` (id 0)
is an ordinary vocabulary entry there.

Decoding options that reproduce this project's search (`SearchOptions`; measured equal in
tests/test_ctranslate2.py):
- `beam_size=1` is our greedy decoding; `return_end_token=True` keeps the final `</s>` that
  our ids end with.
- `min_decoding_length=0`: CTranslate2's default 1 forbids EOS as the first token.
- `max_input_length=max_length`: CTranslate2 then keeps `max_length - 1` pieces and adds
  `</s>`, as `prepare_source` does (with its default 1024, a longer source fails: positions
  past the table of `max_length` rows are not defined).
- `max_decoding_length`: ours is `min(source length + 1 (EOS) + max_extra_length,
  max_length)` tokens (EOS counted) per source; CTranslate2 takes one number per call, which
  must not exceed `max_length`.
- `length_penalty=alpha`: CTranslate2 ranks hypotheses by `log P(y | x) / n ** alpha` (n
  tokens, EOS counted), not by GNMT's `log P(y | x) / ((5 + n) / 6) ** alpha` as our beam
  search does. The two agree at alpha = 0; at the paper's 0.6 CTranslate2 prefers longer
  hypotheses a little more. On runs/sample_en_de (100 test sentences, beam 4) CTranslate2's
  translation equals ours for 99 at alpha 0 (the other one reached the length limit) and
  for 95 at alpha 0.6 (1192 of the 1288 test sentences; BLEU 20.04, ours 20.03).

Quantization. "int8" stores int8 weights with one scale per output row (model.bin 2.1 MB
instead of 7.7 MB for the `quick` preset); on CPU, CTranslate2 then runs int8 GEMMs
("int8_float32"). Measured on runs/sample_en_de (100 test sentences, beam 4, alpha 0.6) on an
AVX2-only AMD EPYC: int8 output equal to float32 for 58 of 100 sentences (BLEU 19.2 against
19.6) through oneDNN, CTranslate2's default on non-Intel CPUs, and for 80 (BLEU 19.3) with
`CT2_USE_MKL=1` (Intel MKL), which was 4x slower there. Small models are more sensitive.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

import numpy as np

# CTranslate2's weight types (`ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES`, 4.x); None
# keeps the float32 weights. tests/test_ctranslate2.py checks this list against the library.
QUANTIZATIONS = (
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)
MODEL_FILE = "model.bin"  # what marks a directory as a CTranslate2 model (may be replaced)


def import_ctranslate2():
    """The `ctranslate2` module, or an ImportError saying how to install it."""
    try:
        import ctranslate2
    except ImportError as error:
        raise ImportError(
            "Exporting to CTranslate2 needs the ctranslate2 package: pip install ctranslate2 "
            f"({error})"
        ) from None
    return ctranslate2


def check_quantization(quantization: str | None) -> str | None:
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(
            f"quantization must be None or one of {QUANTIZATIONS}. "
            f"Received: quantization={quantization!r}"
        )
    return quantization


def check_vocabulary(vocabulary: Sequence[str], vocab_size: int) -> list[str]:
    """`vocabulary` as a list of `vocab_size` distinct strings, or a ValueError naming what is
    wrong."""
    if isinstance(vocabulary, str):
        raise ValueError(f"vocabulary must be a list of tokens. Received: {vocabulary!r:.80}")
    tokens = list(vocabulary)
    if len(tokens) != vocab_size:
        raise ValueError(
            f"vocabulary must hold the model's vocab_size={vocab_size} tokens. "
            f"Received: {len(tokens)} tokens"
        )
    seen = set()
    for index, token in enumerate(tokens):
        if not isinstance(token, str):
            raise ValueError(f"vocabulary must hold strings. Received: {token!r} at id {index}")
        if token in seen:
            raise ValueError(f"vocabulary has a duplicate token {token!r} at id {index}")
        seen.add(token)
    return tokens


def sentencepiece_pieces(path: str) -> list[str]:
    """The pieces of a SentencePiece model file, in id order."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=path)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def _numpy(variable) -> np.ndarray:
    return np.asarray(variable.numpy(), dtype=np.float32)


def _set_linear(spec, denses) -> None:
    """One CTranslate2 linear from Keras Dense layers fused along the output axis:
    kernels `(d_in, d_out_i)` -> weight `(sum d_out_i, d_in)`, biases concatenated."""
    spec.weight = np.concatenate([_numpy(dense.kernel).T for dense in denses], axis=0)
    if all(dense.bias is not None for dense in denses):
        spec.bias = np.concatenate([_numpy(dense.bias) for dense in denses], axis=0)


def _set_layer_norm(spec, norm) -> None:
    spec.gamma = _numpy(norm.gamma)
    spec.beta = _numpy(norm.beta)


def _set_attention(spec, attention, self_attention: bool) -> None:
    """Self-attention: linear_0 = fused Q, K, V, linear_1 = W_O; encoder-decoder attention:
    linear_0 = Q, linear_1 = fused K, V, linear_2 = W_O."""
    query, key, value = attention.query_dense, attention.key_dense, attention.value_dense
    if self_attention:
        _set_linear(spec.linear[0], [query, key, value])
    else:
        _set_linear(spec.linear[0], [query])
        _set_linear(spec.linear[1], [key, value])
    _set_linear(spec.linear[-1], [attention.output_dense])


def _set_layer(spec, layer) -> None:
    """One encoder or decoder layer; each sub-layer's norm (pre or post) sits in its spec."""
    _set_attention(spec.self_attention, layer.self_attention, self_attention=True)
    _set_layer_norm(spec.self_attention.layer_norm, layer.attention_norm)
    if hasattr(layer, "cross_attention"):
        _set_attention(spec.attention, layer.cross_attention, self_attention=False)
        _set_layer_norm(spec.attention.layer_norm, layer.cross_attention_norm)
    _set_linear(spec.ffn.linear_0, [layer.feed_forward.inner])
    _set_linear(spec.ffn.linear_1, [layer.feed_forward.outer])
    _set_layer_norm(spec.ffn.layer_norm, layer.feed_forward_norm)


def position_table(stack, max_length: int, d_model: int) -> np.ndarray:
    """The float32 `(max_length, d_model)` encodings the stack adds to its embeddings: its
    learned table, or the paper's sinusoids (section 3.5), interleaved as our layer has them:

        PE(pos, 2i) = sin(pos / 10000^(2i / d_model)),  PE(pos, 2i+1) = cos(same angle)
    """
    from keras_transformer.layers import LearnedPositionalEncoding

    layer = stack.position_layer
    if isinstance(layer, LearnedPositionalEncoding):
        return _numpy(layer.position_embeddings)[:max_length]  # (max_length, d_model)
    positions = np.arange(max_length, dtype=np.float64)[:, None]  # (max_length, 1)
    two_i = np.arange(d_model) // 2 * 2  # 2i for both columns 2i and 2i+1: (d_model,)
    angles = positions / layer.max_wavelength ** (two_i / d_model)  # (max_length, d_model)
    table = np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype(np.float32)


def _set_stack(spec, stack, embeddings_spec, embedding, config) -> None:
    """Embeddings, positions, layers and the final norm of an encoder or decoder spec."""
    embeddings_spec.weight = _numpy(embedding.embeddings)  # (vocab_size, d_model)
    spec.scale_embeddings = bool(embedding.scale)  # x sqrt(d_model), as SharedEmbedding does
    spec.position_encodings.encodings = position_table(stack, config.max_length, config.d_model)
    for layer_spec, layer in zip(spec.layer, stack.layers):
        _set_layer(layer_spec, layer)
    if stack.final_norm is not None:  # pre-norm only
        _set_layer_norm(spec.layer_norm, stack.final_norm)


def _head_dim(config) -> int | None:
    """CTranslate2's `head_dim` (None: d_model // num_heads); it has one width for queries,
    keys and values."""
    if config.d_k != config.d_v:
        raise ValueError(
            "CTranslate2 needs equal query/key and value widths per head. "
            f"Received: d_k={config.d_k}, d_v={config.d_v}"
        )
    return None if config.d_k == config.d_model // config.num_heads else config.d_k


def _set_model_config(spec_config, vocabulary: list[str], config) -> None:
    """Special tokens by our ids; sources get EOS appended by CTranslate2, as ours do."""
    spec_config.unk_token = vocabulary[config.unk_id]
    spec_config.bos_token = vocabulary[config.bos_id]
    spec_config.eos_token = vocabulary[config.eos_id]
    spec_config.decoder_start_token = vocabulary[config.bos_id]
    spec_config.add_source_bos = False
    spec_config.add_source_eos = True
    spec_config.layer_norm_epsilon = float(config.layer_norm_epsilon)


def build_spec(model, vocabulary: Sequence[str]):
    """A filled, unvalidated `ctranslate2.specs.TransformerSpec` of `model` (a `Transformer`)
    with `vocabulary` (`config.vocab_size` token strings, in id order) for source and target."""
    from keras_transformer.model import Transformer

    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a keras_transformer Transformer. Received: {model!r:.80}")
    config = model.config
    vocabulary = check_vocabulary(vocabulary, config.vocab_size)
    specs = import_ctranslate2().specs
    stack_args = dict(
        num_layers=config.num_layers, num_heads=config.num_heads,
        pre_norm=config.norm_position == "pre", head_dim=_head_dim(config),
    )  # fmt: skip
    spec = specs.TransformerSpec(
        specs.TransformerEncoderSpec(**stack_args), specs.TransformerDecoderSpec(**stack_args)
    )
    encoder, decoder = spec.encoder, spec.decoder
    _set_stack(encoder, model.encoder, encoder.embeddings[0], model.source_embedding, config)
    _set_stack(decoder, model.decoder, decoder.embeddings, model.token_embedding, config)
    decoder.projection.weight = _numpy(model.token_embedding.embeddings)  # tied, no bias
    _set_model_config(spec.config, vocabulary, config)
    spec.register_source_vocabulary(vocabulary)
    spec.register_target_vocabulary(vocabulary)
    return spec


def _check_output_dir(output_dir: str) -> None:
    """An existing CTranslate2 model directory is replaced; any other non-empty one is kept
    (CTranslate2 deletes the directory it writes to)."""
    if os.path.isfile(output_dir) or (
        os.path.isdir(output_dir)
        and os.listdir(output_dir)
        and not os.path.isfile(os.path.join(output_dir, MODEL_FILE))
    ):
        raise FileExistsError(
            "output_dir exists and is not a CTranslate2 model directory (it would be deleted). "
            f"Received: output_dir={output_dir!r}"
        )


def _spec_converter(spec):
    """A `ctranslate2.converters.Converter` whose model is `spec`: its `convert` validates,
    quantizes and saves."""
    converters = import_ctranslate2().converters

    class SpecConverter(converters.Converter):
        def _load(self):
            return spec

    return SpecConverter()


def export_ctranslate2(
    model, output_dir: str, vocabulary: Sequence[str], quantization: str | None = None
) -> str:
    """Write `model` as a CTranslate2 model directory (see the module docstring).

    Args:
        model: a `Transformer` (`build_transformer`, `artifacts.load_trained`).
        output_dir: the directory to write (model.bin, config.json, shared_vocabulary.json);
            an earlier CTranslate2 model there is replaced.
        vocabulary: `config.vocab_size` distinct token strings in id order, e.g. the pieces
            of the run's SentencePiece model (`sentencepiece_pieces`); the tokens at our
            unk/bos/eos ids become CTranslate2's unk/bos/eos tokens.
        quantization: None (float32 weights as trained) or one of `QUANTIZATIONS`, e.g.
            "int8" (about 4x smaller, fastest on CPU).

    Returns:
        `output_dir`.
    """
    check_quantization(quantization)
    spec = build_spec(model, vocabulary)
    _check_output_dir(output_dir)
    return _spec_converter(spec).convert(output_dir, quantization=quantization, force=True)


def export_ctranslate2_run(
    model_dir: str, output_dir: str, quantization: str | None = None, weights: str | None = None
) -> str:
    """Export a training run directory (`artifacts`: config.json, spm.model, final weights or
    the latest checkpoint, or `weights`) with `export_ctranslate2`, and copy its `spm.model`
    into `output_dir` for tokenization. Returns `output_dir`."""
    from keras_transformer import artifacts

    check_quantization(quantization)
    model, _, _ = artifacts.load_trained(model_dir, weights)
    tokenizer_path = artifacts.path(model_dir, artifacts.TOKENIZER_FILE)
    export_ctranslate2(model, output_dir, sentencepiece_pieces(tokenizer_path), quantization)
    shutil.copyfile(tokenizer_path, os.path.join(output_dir, artifacts.TOKENIZER_FILE))
    return output_dir
