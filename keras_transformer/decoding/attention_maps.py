"""Attention weights of one sentence, drawn as heat maps like figures 3-5 of the paper.

    maps = attention_maps(model, tokenizer, "The cat sleeps.", kind="cross")
    plot_attention(maps, layer=-1, head=None, output_path="cross.png")

`kind="encoder"`: encoder self-attention over the source pieces. `kind="cross"`: decoder
encoder-decoder attention while producing the beam-search translation, recomputed with one
full (uncached) pass of the decoder over [BOS] + translation.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from keras_transformer.config import SearchOptions
from keras_transformer.decoding.translator import Translator
from keras_transformer.model import Transformer

KINDS = ("encoder", "cross")


class AttentionMaps(NamedTuple):
    """Weights per layer `(layers, heads, rows, columns)`; rows attend to columns."""

    weights: np.ndarray  # float32: (layers, heads, rows, columns)
    row_tokens: list[str]  # the queries: source pieces, or the output pieces
    column_tokens: list[str]  # the keys: source pieces
    kind: str
    translation: str


def _pieces(tokenizer, ids) -> list[str]:
    pieces = tokenizer.sentencepiece.id_to_string(tf.constant(ids, tf.int32)).numpy()
    return [p.decode("utf-8") for p in pieces]


def attention_maps(
    model: Transformer,
    tokenizer,
    sentence: str,
    kind: str = "cross",
    search: SearchOptions | None = None,
) -> AttentionMaps:
    """Attention weights of `sentence` (see the module docstring for `kind`; `search` is the
    beam search that produces the translation for "cross")."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}. Received: kind={kind!r}")
    config = model.config
    source = tokenizer.encode_source(tf.constant([sentence]), config.max_length).to_tensor()
    source_pieces = _pieces(tokenizer, source[0])  # (1, src_len) -> src_len pieces
    translation, target = "", None
    rows = source_pieces
    if kind == "cross":
        ids, _ = Translator(model, tokenizer, search).search_function(1)(source)  # (1, 1, len)
        translation = tokenizer.detokenize(ids[:, 0]).numpy()[0].decode("utf-8")
        output = [int(t) for t in ids[0, 0].numpy() if t != config.pad_id]
        output = output[: output.index(config.eos_id) + 1] if config.eos_id in output else output
        target = tf.constant([[config.bos_id] + output[:-1]], tf.int32)  # (1, out_len)
        rows = _pieces(tokenizer, output)  # row t: attention while producing output token t
    weights = model.attention_weights(source, target, kind)  # N x (1, heads, rows, src_len)
    stacked = np.stack([np.asarray(w)[0] for w in weights])  # -> (layers, heads, rows, cols)
    return AttentionMaps(stacked, rows, source_pieces, kind, translation)


def plot_attention(
    maps: AttentionMaps, layer: int = -1, head: int | None = None, output_path: str = "a.png"
) -> str:
    """Draw one head (or all heads of `layer` side by side) and save a PNG; returns the path.

    `layer` and `head` count from 0; negative values count from the end. Uses matplotlib's
    Agg canvas directly, without pyplot or global state."""
    from matplotlib.figure import Figure

    layers, heads = maps.weights.shape[:2]
    if not -layers <= layer < layers:
        raise ValueError(f"layer must be in [-{layers}, {layers}). Received: layer={layer}")
    if head is not None and not -heads <= head < heads:
        raise ValueError(f"head must be in [-{heads}, {heads}). Received: head={head}")
    chosen = list(range(heads)) if head is None else [head % heads]
    columns = min(len(chosen), 4)
    grid_rows = math.ceil(len(chosen) / columns)
    n_rows, n_cols = maps.weights.shape[2:]
    cell = 0.32
    figure = Figure(
        figsize=(columns * (1.5 + cell * n_cols), grid_rows * (1.5 + cell * n_rows)),
        layout="constrained",
    )
    axes = np.atleast_1d(figure.subplots(grid_rows, columns, squeeze=False)).ravel()
    top = float(maps.weights[layer, chosen].max())  # one colour scale for the drawn heads
    for ax, h in zip(axes, chosen):
        image = ax.imshow(maps.weights[layer, h], cmap="Blues", vmin=0.0, vmax=top,
                          aspect="auto")  # fmt: skip
        ax.set_xticks(range(n_cols), maps.column_tokens, rotation=90, fontsize=8)
        ax.set_yticks(range(n_rows), maps.row_tokens, fontsize=8)
        ax.set_title(f"layer {layer % layers}, head {h}", fontsize=9)
    for ax in axes[len(chosen) :]:
        ax.axis("off")
    what = "encoder self-attention" if maps.kind == "encoder" else "encoder-decoder attention"
    figure.suptitle(f"{what}\n{maps.translation}" if maps.kind == "cross" else what, fontsize=9)
    figure.colorbar(image, ax=list(axes[: len(chosen)]), shrink=0.6)
    figure.savefig(output_path, dpi=120)
    return output_path
