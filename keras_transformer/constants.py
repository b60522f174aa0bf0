"""Choices and fixed ids written once, for the config, the layers and the data pipeline.

Plain Python (no TensorFlow or Keras import), so every module can use it.
"""

from __future__ import annotations

# Special ids of every vocabulary this project trains (SentencePiece, see data/tokenizer.py):
# the model, the data pipeline and decoding all read them from here.
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")  # paper, section 3.5 / Table 3 row (E)
NORM_POSITIONS = ("post", "pre")  # LayerNorm(x + Sublayer(x)) (paper) or x + Sublayer(LN(x))
INFERENCE_DTYPES = ("float32", "bfloat16")  # artifacts.load_trained(dtype=...), --dtype
# The guided signatures' inputs besides `text`, each string (batch,), "" for none
# (keras_transformer.decoding.guided): the prefix, tab-separated constraints and phrases to
# avoid, glossary lines `source<TAB>target` joined by newlines.
GUIDE_KEYS = ("prefix", "constraints", "avoid", "glossary")
# Learning-rate decays after warm-up (training.schedule): the paper's inverse square root, and
# the shapes a run planned to a time budget may end with.
DECAYS = ("rsqrt", "rsqrt_cooldown", "linear", "cosine")
