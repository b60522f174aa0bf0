"""The encoder-decoder Transformer as a functional `keras.Model` subclass that owns its decoding.

    model = Transformer(TransformerConfig.base(vocab_size=37000))   # or build_transformer(...)
    logits = model({"source": source_ids, "target": shifted_target_ids})  # (b, tgt_len, vocab)

    memory, source_mask = model.encode(source_ids)                 # once per batch
    cache = model.init_cache(memory)                               # cross keys/values once
    logits, cache = model.decode(next_ids, source_mask, cache)     # one step

The sublayers are attributes (`token_embedding`, `source_embedding`, `encoder`, `decoder`), the
`TransformerConfig` is serialized by `get_config`, so a reloaded `.keras` file decodes as it
is. Everything uses keras.ops only and runs on every backend.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_transformer.config import TransformerConfig
from keras_transformer.layers import Decoder, Encoder, SharedEmbedding


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


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(keras.Model):
    """The Transformer of the paper (section 3) as a functional model.

    Args:
        config: a `TransformerConfig` (or its `to_dict()`).

    Call arguments (the functional graph):
        `{"source": int32 (batch, src_len), "target": int32 (batch, tgt_len)}`, where target
        is the decoder input (the reference shifted right, starting with `bos_id`) and
        `pad_id` marks padding in both.

    Returns:
        float32 logits `(batch, tgt_len, vocab_size)`.

    Example:
    >>> model = Transformer(TransformerConfig.tiny(vocab_size=100))
    >>> logits = model({"source": ops.ones((2, 7), "int32"), "target": ops.ones((2, 5), "int32")})
    """

    def __init__(self, config: TransformerConfig | dict, **kwargs):
        if isinstance(config, dict):
            config = TransformerConfig.from_dict(config)
        if not isinstance(config, TransformerConfig):
            raise TypeError(
                f"config must be a TransformerConfig. Received: {type(config).__name__}"
            )
        # Layers first: the functional graph below is traced through them.
        token_embedding = SharedEmbedding(config.vocab_size, config.d_model, name="token_embedding")
        source_embedding = token_embedding
        if not config.share_embeddings:
            source_embedding = SharedEmbedding(
                config.vocab_size, config.d_model, name="source_embedding"
            )
        encoder = Encoder(name="encoder", **_stack_kwargs(config))
        decoder = Decoder(name="decoder", **_stack_kwargs(config))

        source = keras.Input(shape=(None,), dtype="int32", name="source")
        target = keras.Input(shape=(None,), dtype="int32", name="target")
        source_mask = ops.not_equal(source, config.pad_id)  # (batch, src_len)
        target_mask = ops.not_equal(target, config.pad_id)  # (batch, tgt_len)
        memory = encoder(source_embedding(source), padding_mask=source_mask)
        hidden = decoder(
            token_embedding(target), memory, memory_mask=source_mask, target_mask=target_mask
        )  # (batch, tgt_len, d_model)
        logits = token_embedding(hidden, reverse=True)  # (batch, tgt_len, vocab_size), float32
        kwargs.setdefault("name", "transformer")
        super().__init__({"source": source, "target": target}, logits, **kwargs)

        self.config = config
        self.token_embedding = token_embedding
        self.source_embedding = source_embedding
        self.encoder = encoder
        self.decoder = decoder

    def get_config(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Transformer:
        return cls(**config)

    # Decoding -------------------------------------------------------------------------------

    def encode(self, source_ids, training: bool = False):
        """Run the encoder once: `(memory (batch, src_len, d_model), source_mask (batch,
        src_len) bool)`."""
        source_mask = ops.not_equal(source_ids, self.config.pad_id)  # (batch, src_len)
        embedded = self.source_embedding(source_ids)  # (batch, src_len, d_model)
        memory = self.encoder(embedded, padding_mask=source_mask, training=training)
        return memory, source_mask

    def init_cache(self, memory, max_length: int | None = None) -> list:
        """Decoder cache for `memory`: encoder-decoder keys/values are projected once here.

        A list of N `{"self": {"key", "value"}, "cross": {"key", "value"}}` dicts of
        `(batch, h, len, d_k)` tensors. Without `max_length` the self-attention part grows by
        one position per step; with it, it is a fixed `(batch, h, max_length, d_k)` buffer
        (static shapes, for XLA)."""
        return self.decoder.init_cache(memory, max_length=max_length)

    def decode(
        self, target_ids, memory_mask, cache: list, cache_update_index=None, training=False,
        output_kernel=None,
    ):  # fmt: skip
        """One decoding step (or several tokens) with the cache.

        Args:
            target_ids: int `(batch, step_len)`, the newest target tokens.
            memory_mask: boolean `(batch, src_len)` from `encode`.
            cache: from `init_cache` or a previous `decode`.
            cache_update_index: the position of `target_ids[:, 0]` for a fixed-size cache.
            output_kernel: optional `token_embedding.output_kernel()`, computed once per
                search (the pre-softmax projection's transposed weights).

        Returns:
            `(logits (batch, step_len, vocab_size) float32, new_cache)`.
        """
        hidden, new_cache = self.decoder(
            self.token_embedding(target_ids),
            None,
            memory_mask=memory_mask,
            cache=cache,
            cache_update_index=cache_update_index,
            training=training,
        )  # hidden: (batch, step_len, d_model)
        logits = self.token_embedding(hidden, reverse=True, output_kernel=output_kernel)
        return logits, new_cache

    def attention_weights(self, source_ids, target_ids=None, kind: str = "cross") -> list:
        """Per-layer attention weights of a teacher-forced pass, for plots.

        kind: "encoder" (source self-attention, each `(batch, h, src_len, src_len)`) or
        "cross" (encoder-decoder attention of the decoder reading `target_ids`, each
        `(batch, h, tgt_len, src_len)`)."""
        if kind not in ("encoder", "cross"):
            raise ValueError(f"kind must be 'encoder' or 'cross'. Received: kind={kind!r}")
        source_mask = ops.not_equal(source_ids, self.config.pad_id)  # (batch, src_len)
        memory, encoder_weights = self.encoder(
            self.source_embedding(source_ids), padding_mask=source_mask,
            return_attention_scores=True,
        )  # fmt: skip
        if kind == "encoder":
            return encoder_weights
        _, weights = self.decoder(
            self.token_embedding(target_ids), memory, memory_mask=source_mask,
            target_mask=ops.not_equal(target_ids, self.config.pad_id),
            return_attention_scores=True,
        )  # fmt: skip
        return weights


def build_transformer(
    config: TransformerConfig, name: str = "transformer", dtype: str | None = None
) -> Transformer:
    """`Transformer(config)`: the paper's model (see `Transformer`).

    `dtype`: a Keras dtype policy name ("float32", "mixed_bfloat16", "bfloat16", ...) for its
    layers; default the global policy (`keras.config.dtype_policy()`), which is left as it was.
    """
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig. Received: {type(config).__name__}")
    if dtype is None:
        return Transformer(config, name=name)
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(dtype)  # layers take the global policy when built
    try:
        return Transformer(config, name=name)
    finally:
        keras.config.set_dtype_policy(previous)
