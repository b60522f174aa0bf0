"""Decoding: beam search, greedy and sampled decoding over a cached incremental decoder,
translation of ids and strings, teacher-forced scoring and BLEU evaluation (TensorFlow
ops)."""

from keras_transformer.decoding.beam_search import beam_search, length_penalty, tile_beams
from keras_transformer.decoding.incremental import (
    incremental_decoder,
    incremental_decoder_with_shared,
)
from keras_transformer.decoding.sampling import filter_logits, sample, top_k_filter, top_p_filter
from keras_transformer.decoding.scoring import score_ids, score_pairs
from keras_transformer.decoding.translator import Translator, translate_ids

__all__ = [
    "Translator",
    "beam_search",
    "filter_logits",
    "incremental_decoder",
    "incremental_decoder_with_shared",
    "length_penalty",
    "sample",
    "score_ids",
    "score_pairs",
    "tile_beams",
    "top_k_filter",
    "top_p_filter",
    "translate_ids",
]
