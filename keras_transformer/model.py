"""The encoder-decoder Transformer as a Keras functional model, and the pieces decoding reuses.

    model = build_transformer(TransformerConfig.base(vocab_size=37000))
    logits = model({"source": source_ids, "target": shifted_target_ids})  # (b, tgt_len, vocab)

`encode`, `init_cache` and `decode` call the same trained layers step by step for
incremental (cached) decoding; they use keras.ops only, so they run on every backend.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.config import TransformerConfig
from keras_transformer.layers import Decoder, Encoder, SharedEmbedding

TOKEN_EMBEDDING = "token_embedding"
SOURCE_EMBEDDING = "source_embedding"


def _stack_kwargs(config: TransformerConfig) -> dict:
    return dict(
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        d_ff=config.d_ff,
        key_dim=config.d_k,
        value_dim=config.d_v,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        norm_position=config.norm_position,
        layer_norm_epsilon=config.layer_norm_epsilon,
        positional_encoding=config.positional_encoding,
        max_length=config.max_length,
    )


def build_transformer(config: TransformerConfig, name: str = "transformer") -> keras.Model:
    """Build the Transformer of the paper as a functional `keras.Model`.

    Inputs: `{"source": int32 (batch, src_len), "target": int32 (batch, tgt_len)}`, where target
    is the decoder input (the reference shifted right, starting with `bos_id`) and `pad_id`
    marks padding in both. Output: float32 logits `(batch, tgt_len, vocab_size)`.
    """
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig. Received: {type(config).__name__}")
    source = keras.Input(shape=(None,), dtype="int32", name="source")
    target = keras.Input(shape=(None,), dtype="int32", name="target")
    token_embedding = SharedEmbedding(config.vocab_size, config.d_model, name=TOKEN_EMBEDDING)
    source_embedding = token_embedding
    if not config.share_embeddings:
        source_embedding = SharedEmbedding(config.vocab_size, config.d_model, name=SOURCE_EMBEDDING)
    source_mask = ops.not_equal(source, config.pad_id)  # (batch, src_len)
    target_mask = ops.not_equal(target, config.pad_id)  # (batch, tgt_len)
    encoder = Encoder(name="encoder", **_stack_kwargs(config))
    decoder = Decoder(name="decoder", **_stack_kwargs(config))
    memory = encoder(source_embedding(source), padding_mask=source_mask)
    hidden = decoder(
        token_embedding(target), memory, memory_mask=source_mask, target_mask=target_mask
    )  # (batch, tgt_len, d_model)
    logits = token_embedding(hidden, reverse=True)  # (batch, tgt_len, vocab_size), float32
    model = keras.Model({"source": source, "target": target}, logits, name=name)
    model.transformer_config = config
    return model


def _source_embedding(model: keras.Model) -> SharedEmbedding:
    names = {layer.name for layer in model.layers}
    return model.get_layer(SOURCE_EMBEDDING if SOURCE_EMBEDDING in names else TOKEN_EMBEDDING)


def encode(model: keras.Model, source_ids, pad_id: int = 0, training: bool = False):
    """Run the encoder once: returns `(memory (batch, src_len, d_model), source_mask)`."""
    source_mask = ops.not_equal(source_ids, pad_id)  # (batch, src_len)
    embedded = _source_embedding(model)(source_ids)
    memory = model.get_layer("encoder")(embedded, padding_mask=source_mask, training=training)
    return memory, source_mask


def init_cache(model: keras.Model, memory, max_length: int | None = None) -> list:
    """Decoder cache for `memory`: encoder-decoder keys/values are projected once here.

    Without `max_length` the self-attention cache grows by one position per step; with it, it
    is a fixed `(batch, h, max_length, d_k)` buffer (static shapes, for XLA).
    """
    return model.get_layer("decoder").init_cache(memory, max_length=max_length)


def decode(
    model: keras.Model,
    target_ids,
    memory_mask,
    cache: list,
    cache_update_index=None,
    training: bool = False,
):
    """One decoding step (or several tokens) with the cache.

    Args:
        target_ids: int `(batch, step_len)`, the newest target tokens.
        memory_mask: boolean `(batch, src_len)` from `encode`.
        cache: from `init_cache` or a previous `decode`.
        cache_update_index: the position of `target_ids[:, 0]` for a fixed-size cache.

    Returns:
        `(logits (batch, step_len, vocab_size) float32, new_cache)`.
    """
    token_embedding = model.get_layer(TOKEN_EMBEDDING)
    hidden, new_cache = model.get_layer("decoder")(
        token_embedding(target_ids),
        None,
        memory_mask=memory_mask,
        cache=cache,
        cache_update_index=cache_update_index,
        training=training,
    )
    return token_embedding(hidden, reverse=True), new_cache
