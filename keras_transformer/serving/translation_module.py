"""`TranslationModule`: the `tf.Module` an export saves, the Keras model and the SentencePiece
tokenizer with one `tf.function` per signature (their names, inputs and outputs:
`serving.export`'s module docstring and `serving.signatures`).

    module = TranslationModule(make_translator(model, tokenizer), model, tokenizer, n_best=4)
    tf.saved_model.save(module, path, signatures=module.signatures())
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.serving.signatures import (
    ALIGN_SIGNATURE,
    ALTERNATIVES_SIGNATURE,
    GUIDE_KEYS,
    GUIDED_OUTPUT_KEYS,
    GUIDED_SIGNATURE,
    INPUT_KEY,
    MARKUP_OUTPUT_KEYS,
    MARKUP_SIGNATURE,
    NBEST_SIGNATURE,
    SAMPLE_INPUTS,
    SAMPLE_SIGNATURE,
    SCORE_INPUT_KEYS,
    SCORE_OUTPUT_KEYS,
    SCORE_SIGNATURE,
    SEGMENT_SIGNATURE,
    SERVING_SIGNATURE,
)
from keras_transformer.tracing import graph_function

TEXT_SPEC = tf.TensorSpec([None], tf.string, name=INPUT_KEY)
SAMPLE_SPECS = [TEXT_SPEC] + [
    tf.TensorSpec([], dtype, name=key) for key, (dtype, _) in SAMPLE_INPUTS.items()
]
SCORE_SPECS = [tf.TensorSpec([None], tf.string, name=key) for key in SCORE_INPUT_KEYS]
GUIDED_SPECS = [TEXT_SPEC] + [tf.TensorSpec([None], tf.string, name=key) for key in GUIDE_KEYS]
# Tensor defaults of a signature function's arguments become the SignatureDef's defaults.
_SAMPLE_DEFAULTS = {key: tf.constant(value, dtype) for key, (dtype, value) in SAMPLE_INPUTS.items()}


class _Untracked:
    """Holds objects outside a SavedModel's object graph (a plain object is not tracked)."""

    def __init__(self, **objects):
        self.__dict__.update(objects)


class TranslationModule(tf.Module):
    """The served object: strings in, translations, scores and pair scores out.

    Args:
        translator: a `keras_transformer.decoding.Translator`: `translate_tensors(text)`,
            `translate_tensors_n_best(text, n_best)` and `sample_tensors(text, ...)` return
            `{"translations", "scores"}`.
        model: the Keras model; the `tf.Variable`s behind its weights are tracked here.
        tokenizer: the `SubwordTokenizer` (tracked so its SentencePiece resource is saved).
        n_best: the width of `translate_nbest`'s outputs.

    The model and the translator are kept out of the object graph: a tracked Keras 3 weight
    is saved as a copy of the `tf.Variable` it wraps, which the signatures never read. With
    them tracked, every weight was stored twice and TF1-style loaders (TF Serving's C++
    loader, `saved_model_cli run`) restored only the copies, so every request failed with
    "Could not find variable" (keras-team/keras#20095). `tf.saved_model.load` hid this: it
    rebinds the captures through the object graph.
    """

    def __init__(self, translator, model, tokenizer, n_best: int, name: str | None = None,
                 guided: bool = False):  # fmt: skip
        super().__init__(name=name)
        self._parts = _Untracked(translator=translator, model=model)
        self.model_variables = [weight.value for weight in model.variables]  # the tf.Variables
        self.output_kernel = translator.output_kernel  # the XLA export's stored E^T, or None
        self.tokenizer = tokenizer
        self.n_best = n_best
        from keras_transformer.decoding.alignments import word_start_table

        self._parts.starts = word_start_table(tokenizer.model_proto)  # (vocab,) int32
        self.guided = guided
        if guided:  # only then: saving traces every tf.function with a signature it holds
            self.translate_guided = graph_function(self._guided_one, input_signature=GUIDED_SPECS)
            self.translate_alternatives = graph_function(
                self._guided_alternatives, input_signature=GUIDED_SPECS
            )

    @property
    def translator(self):
        return self._parts.translator

    @property
    def model(self):
        return self._parts.model

    @graph_function(input_signature=[TEXT_SPEC])
    def translate(self, text):
        """`text` string (batch,) -> translations string (batch,), scores float32 (batch,)."""
        out = self.translator.translate_tensors(text)
        translations = tf.ensure_shape(out["translations"], [None])  # (batch,)
        scores = tf.ensure_shape(tf.cast(out["scores"], tf.float32), [None])  # (batch,)
        return {"translations": translations, "scores": scores}

    @graph_function(input_signature=[TEXT_SPEC])
    def translate_nbest(self, text):
        """`text` (batch,) -> translations string, scores float32, both (batch, n_best)."""
        out = self.translator.translate_tensors_n_best(text, n_best=self.n_best)
        translations = tf.ensure_shape(out["translations"], [None, self.n_best])
        scores = tf.ensure_shape(tf.cast(out["scores"], tf.float32), [None, self.n_best])
        return {"translations": translations, "scores": scores}

    @graph_function(input_signature=SAMPLE_SPECS)
    def translate_sample(
        self,
        text,
        temperature=_SAMPLE_DEFAULTS["temperature"],
        top_k=_SAMPLE_DEFAULTS["top_k"],
        top_p=_SAMPLE_DEFAULTS["top_p"],
        seed=_SAMPLE_DEFAULTS["seed"],
    ):
        """`text` (batch,) and scalar knobs -> translations string, scores float32 (batch,):
        `Translator.sample_tensors` with method "sample" (top_k 1 is greedy)."""
        out = self.translator.sample_tensors(
            text, "sample", temperature=temperature, top_k=top_k, top_p=top_p, seed=seed
        )
        translations = tf.ensure_shape(out["translations"], [None])  # (batch,)
        scores = tf.ensure_shape(tf.cast(out["scores"], tf.float32), [None])  # (batch,)
        return {"translations": translations, "scores": scores}

    @graph_function(input_signature=SCORE_SPECS)
    def score(self, source, target):
        """`source`, `target` string (batch,) -> log_prob, per_token, score float32 (batch,):
        teacher-forced log P(target | source), with the search's alpha for `score`; whole
        inputs are scored segment by segment, as they are translated."""
        from keras_transformer.decoding import scoring

        alpha = self.translator.options.alpha
        source, target = self._checked(source, "source"), self._checked(target, "target")
        if self.translator.documents.segment:
            out = scoring.score_document_tensors(self.model, self.tokenizer, source, target, alpha)
        else:
            out = scoring.score_tensors(self.model, self.tokenizer, source, target, alpha)
        return {key: tf.ensure_shape(out[key], [None]) for key in SCORE_OUTPUT_KEYS}

    @graph_function(input_signature=[TEXT_SPEC])
    def segment(self, text):
        """`text` (batch,) -> segments string (batch, max_segments), "" after each input's
        last, and num_segments int32 (batch,): the sentences the translate signatures send
        to the model (one per input where the export does not segment)."""
        from keras_transformer.data.segmenter import segment

        text = self._checked(text, "input")
        if self.translator.documents.segment:
            segments = segment(text).segments  # (batch, None)
        else:
            segments = tf.RaggedTensor.from_tensor(text[:, None])  # -> (batch, 1)
        return {
            "segments": tf.ensure_shape(segments.to_tensor(default_value=""), [None, None]),
            "num_segments": tf.cast(segments.row_lengths(), tf.int32),
        }

    @graph_function(input_signature=[TEXT_SPEC])
    def translate_markup(self, text):
        """`text` (batch,) with inline tags -> translations, alignments, warnings string and
        scores float32, each (batch,) (`decoding.markup_translation.translate_markup`)."""
        from keras_transformer.decoding.markup_translation import translate_markup

        out = translate_markup(self.translator, text, self._parts.starts)
        return {key: tf.ensure_shape(out[key], [None]) for key in MARKUP_OUTPUT_KEYS}

    @graph_function(input_signature=SCORE_SPECS)
    def align(self, source, target):
        """`source`, `target` string (batch,) -> alignments string (batch,): Moses "i-j"
        pairs of each pair, aligned whole (`decoding.alignments.align_tensors`)."""
        from keras_transformer.decoding.alignments import align_tensors
        from keras_transformer.decoding.scoring import _string_pairs

        source, target = _string_pairs(
            self._checked(source, "source"), self._checked(target, "target")
        )
        out = align_tensors(self.model, self.tokenizer, source, target, self._parts.starts,
                            **self.translator.alignment.kwargs())  # fmt: skip
        return {"alignments": tf.ensure_shape(out["alignments"], [None])}

    def _checked(self, texts, name: str):
        """`texts` string (batch,) after the checks every translation input gets
        (`data.input_checks.check_size`: at most `max_input_bytes`)."""
        from keras_transformer.data.input_checks import check_size

        limit = self.translator.documents.max_input_bytes
        return check_size(texts, limit, name, "max_input_bytes")

    def _guided_one(self, text, prefix, constraints, avoid, glossary):
        """`translate_guided`: strings (batch,) -> translations, scores, constraints_met
        (batch,)."""
        return self._guided(text, prefix, constraints, avoid, glossary, 0, [None])

    def _guided_alternatives(self, text, prefix, constraints, avoid, glossary):
        """`translate_alternatives`: strings (batch,) -> translations, scores,
        constraints_met (batch, n_best): the n_best best continuations of the prefix that
        differ in their first piece; where fewer exist, the missing ones come last as "",
        score -inf, constraints_met false (every other score is finite)."""
        shape = [None, self.n_best]
        return self._guided(text, prefix, constraints, avoid, glossary, self.n_best, shape)

    def _guided(self, text, prefix, constraints, avoid, glossary, alternatives, shape):
        from keras_transformer.decoding.guided import translate_guided

        out = translate_guided(self.translator, text, prefix, constraints, avoid, glossary,
                               alternatives)  # fmt: skip
        return {key: tf.ensure_shape(out[key], shape) for key in GUIDED_OUTPUT_KEYS}

    def signatures(self) -> dict:
        """The SignatureDefs: each the module's own `tf.function` (input signatures fixed), not
        a concrete function of it. `tf.saved_model.save` stores a signature given as a
        concrete function a second time beside the tracked function's own trace: every
        graph twice, a larger saved_model.pb and a slower load
        (benchmarks/results/2026-11-27-export-graph-once.md)."""
        signatures = {
            SERVING_SIGNATURE: self.translate,
            NBEST_SIGNATURE: self.translate_nbest,
            SAMPLE_SIGNATURE: self.translate_sample,  # keeps its defaults too
            SCORE_SIGNATURE: self.score,
            SEGMENT_SIGNATURE: self.segment,
            MARKUP_SIGNATURE: self.translate_markup,
            ALIGN_SIGNATURE: self.align,
        }
        if self.guided:
            signatures[GUIDED_SIGNATURE] = self.translate_guided
            signatures[ALTERNATIVES_SIGNATURE] = self.translate_alternatives
        return signatures
