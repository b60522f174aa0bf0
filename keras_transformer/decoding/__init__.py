"""Decoding: beam search, greedy and sampled decoding over a cached incremental decoder,
translation of ids and strings, and BLEU evaluation (TensorFlow ops)."""

from keras_transformer.decoding.beam_search import beam_search, length_penalty, tile_beams
from keras_transformer.decoding.incremental import incremental_decoder
from keras_transformer.decoding.sampling import sample, top_k_filter, top_p_filter
from keras_transformer.decoding.translator import Translator, translate_ids

__all__ = [
    "Translator",
    "beam_search",
    "incremental_decoder",
    "length_penalty",
    "sample",
    "tile_beams",
    "top_k_filter",
    "top_p_filter",
    "translate_ids",
]
