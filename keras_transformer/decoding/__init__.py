"""Decoding: one loop (`decode`) with two strategies, beam search (`BeamSearch`) and greedy or
sampled decoding (`Sampling`), over a cached incremental decoder; translation of ids and
strings, teacher-forced scoring and BLEU evaluation (TensorFlow ops)."""

from keras_transformer.decoding.beam_search import BeamSearch, length_penalty
from keras_transformer.decoding.incremental import fixed_shape_step, per_source_step
from keras_transformer.decoding.loop import LoopOptions, StepFunction, decode, tile_beams
from keras_transformer.decoding.sampling import (
    Sampling,
    SamplingOptions,
    filter_logits,
    top_k_filter,
    top_p_filter,
)
from keras_transformer.decoding.scoring import score_ids, score_pairs
from keras_transformer.decoding.search import translate_ids
from keras_transformer.decoding.translator import Translator

__all__ = [
    "BeamSearch",
    "LoopOptions",
    "Sampling",
    "SamplingOptions",
    "StepFunction",
    "Translator",
    "decode",
    "filter_logits",
    "fixed_shape_step",
    "length_penalty",
    "score_ids",
    "per_source_step",
    "score_pairs",
    "tile_beams",
    "top_k_filter",
    "top_p_filter",
    "translate_ids",
]
