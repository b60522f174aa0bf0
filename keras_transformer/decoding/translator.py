"""Translation with beam search: ids in, ids out (`translate_ids`), and strings in, strings out
(`Translator`), with the paper's settings by default (beam 4, alpha 0.6, at most
source length + 50 output tokens); greedy decoding and top-k / top-p sampling through the
same objects.

    ids, scores = translate_ids(model, source_ids)                 # (batch, len), (batch,)
    translator = Translator(model, tokenizer, SearchOptions(beam_size=4))
    translator(["Hello world."])                                    # -> ["Hallo Welt."]
    translator.translate_tensors(tf.constant(["Hello world."]))     # pure TF, for export
    texts, scores = translator.sample(lines, method="top_p", top_p=0.9, seed=7)
    translator.sample_tensors(tf.constant(["Hi"]), top_k=k, seed=s)  # pure TF, for export

Lengths. `Translator` takes whole texts: it splits them into sentences and cuts a sentence
longer than `DocumentOptions.segment_limit` into parts (`decoding.documents`), so no input is
truncated unless `DocumentOptions(overlong="truncate")` asks for it. The id-level functions
(`translate_ids`, `search_ids`, `sample_ids`) take one source per row: a source longer than
the model's `max_length` is cut to `max_length - 1` tokens plus EOS (eager calls log one
warning, logger "keras_transformer"). An empty source is just [EOS]. Output lengths count
generated tokens with EOS: each source may produce at most `min(source length +
max_extra_length, max_length)` tokens (the decoder's positions stop at the model's
`max_length`); one that reaches it without EOS is finished there.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.checks import check_int
from keras_transformer.config import AlignmentOptions, DocumentOptions, SearchOptions
from keras_transformer.constants import PAD_ID
from keras_transformer.decoding import incremental, padded_kernels
from keras_transformer.decoding.beam_search import BeamSearch, length_penalty
from keras_transformer.decoding.documents import cut_ranks, translate_documents
from keras_transformer.decoding.incremental import fixed_shape_step, per_source_step
from keras_transformer.decoding.loop import LoopOptions, Strategy, decode
from keras_transformer.decoding.sampling import Sampling, SamplingOptions, check_sampling_args
from keras_transformer.model import Transformer

logger = logging.getLogger("keras_transformer")


def check_model(model) -> Transformer:
    if not isinstance(model, Transformer):
        raise TypeError(
            "model must be a keras_transformer Transformer (build_transformer, a loaded .keras "
            f"file or load_trained). Received: {type(model).__name__}"
        )
    return model


def prepare_source(source_ids, config) -> tuple[tf.Tensor, tf.Tensor]:
    """Right-padded source ids `(batch, src_len)` (dense or ragged) -> `(ids, lengths)`.

    Rows longer than `config.max_length` keep `max_length - 1` tokens and end with EOS; an
    empty row becomes [EOS]. Returns int32 `(batch, min(src_len, max_length))` (at least one
    column) and the int32 lengths `(batch,)`, EOS included."""
    if isinstance(source_ids, tf.RaggedTensor):
        source_ids = source_ids.to_tensor(default_value=config.pad_id)
    ids = tf.cast(tf.convert_to_tensor(source_ids), tf.int32)
    if ids.shape.rank != 2:
        raise ValueError(f"source_ids must be (batch, src_len). Received shape {ids.shape}")
    ids = tf.pad(ids, [[0, 0], [0, tf.maximum(1 - tf.shape(ids)[1], 0)]],
                 constant_values=config.pad_id)  # fmt: skip  # at least one column
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(ids, config.pad_id), tf.int32), axis=1)
    ids = ids[:, : config.max_length]
    columns = tf.range(tf.shape(ids)[1])[None, :]  # (1, src_len)
    cut = (lengths > config.max_length)[:, None] & tf.equal(columns, config.max_length - 1)
    empty = tf.equal(lengths, 0)[:, None] & tf.equal(columns, 0)
    ids = tf.where(cut | empty, config.eos_id, ids)
    return ids, tf.clip_by_value(lengths, 1, config.max_length)


def decode_sources(
    model: Transformer,
    source_ids,
    options: SearchOptions,
    strategy: Strategy,
    pad_kernels: bool | None = None,
    transpose_kernels: bool = False,
    rows=None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """`loop.decode` with `strategy` over the cached decoder of `model`, TF ops only
    (XLA-compatible with padded_decode): right-padded source ids are prepared
    (`prepare_source`), encoded once, and each may produce at most `min(source length +
    options.max_extra_length, max_length)` tokens; with growing buffers the cache is per source
    (`incremental.per_source_step`: never tiled by beam nor copied to reorder it) and finished
    sources' rows are dropped; with `padded_decode`, `incremental.fixed_shape_step`.
    `pad_kernels` (growing buffers only): whether the step multiplies by padded copies of the
    decoder's weights (`decoding.padded_kernels`); None: `padded_kernels.default_pad_kernels()`.
    `transpose_kernels` (fixed buffers, XLA only): `incremental.fixed_shape_step`'s.
    `rows` (int32 scalar, default all): only the first `rows` sources are decoded; the others
    (padding rows under XLA) get a length limit of 0, done before the first step.

    Returns the strategy's `(ids, scores)`, ids with BOS first."""
    config = model.config
    source, lengths = prepare_source(source_ids, config)
    memory, memory_mask = model.encode(source)  # once per batch
    limits = tf.minimum(lengths + options.max_extra_length, config.max_length)  # (batch,)
    if rows is not None:
        limits = tf.where(tf.range(tf.shape(limits)[0]) < rows, limits, 0)
    # Static under XLA: computed from the (padded) source width, not from its values.
    max_len = tf.minimum(tf.shape(source)[1] + options.max_extra_length, config.max_length)
    loop = LoopOptions(config.eos_id, config.pad_id, padded=options.padded_decode)
    bos_ids = tf.fill(tf.shape(source)[:1], config.bos_id)  # (batch,)
    if options.padded_decode:  # fixed-size buffers, reordered by gather (XLA's layout)
        step = fixed_shape_step(model, memory, memory_mask, max_len, transpose_kernels)
    else:  # a per-source cache that is never copied to reorder it
        if pad_kernels is None:
            pad_kernels = padded_kernels.default_pad_kernels()
        step = per_source_step(
            model, memory, memory_mask, strategy.rows_per_item, pad_kernels=pad_kernels
        )
    return decode(strategy, step, bos_ids, max_len, loop, max_lengths=limits)


# Under XLA (`jit_compile`) every new source shape compiles the search again (seconds): the
# translator pads the width to a multiple of this and the batch to a power of two (copies of
# its first row, which finish when it does), so at most max_length / 16 widths times
# log2(batch) batch sizes compile. Padding is inert (encoder masks, per-sentence length
# limits, the copies' outputs dropped): the outputs do not change.
XLA_WIDTH_MULTIPLE = 16


def pad_width(source_ids, multiple: int) -> tf.Tensor:
    """Int32 source ids `(batch, src_len)` right-padded with `PAD_ID` to the next multiple
    of `multiple` columns -> `(batch, ceil(src_len / multiple) * multiple)`."""
    if isinstance(source_ids, tf.RaggedTensor):
        source_ids = source_ids.to_tensor(default_value=PAD_ID)
    width = tf.shape(source_ids)[1]
    extra = (multiple - width % multiple) % multiple
    return tf.pad(source_ids, [[0, 0], [0, extra]], constant_values=PAD_ID)


def pad_rows(source_ids) -> tf.Tensor:
    """Int32 source ids `(batch, src_len)` with copies of the first row appended up to the
    next power of two rows -> `(2 ** ceil(log2(batch)), src_len)`; no rows stay none."""
    batch = tf.shape(source_ids)[0]
    target = batch - 1  # the next power of two at or above batch, in integer ops
    for shift in (1, 2, 4, 8, 16):
        target = tf.bitwise.bitwise_or(target, tf.bitwise.right_shift(target, shift))
    copies = tf.repeat(source_ids[:1], target + 1 - batch, axis=0)  # (target + 1 - batch, len)
    return tf.concat([source_ids, copies], axis=0)


def search_ids(
    model: Transformer,
    source_ids,
    options: SearchOptions,
    pad_kernels: bool | None = None,
    transpose_kernels: bool = False,
) -> tuple[tf.Tensor, tf.Tensor]:
    """The numeric core of `translate_ids`: beam search with `options` (`pad_kernels` and
    `transpose_kernels` as in `decode_sources`).

    Returns int32 `(batch, n_best, max_len)` ids without BOS, `pad_id` after EOS, and float32
    `(batch, n_best)` scores."""
    beam = BeamSearch(model.config.vocab_size, options)
    ids, scores = decode_sources(model, source_ids, options, beam, pad_kernels, transpose_kernels)
    return ids[:, :, 1:], scores  # drop BOS -> (batch, n_best, max_len)


def seed_pair(seed) -> tf.Tensor:
    """An int scalar (Python or tensor) -> the int64 `(2,)` seed `[seed, 0]` of the stateless
    random ops; a pair is kept as is."""
    seed = tf.cast(seed, tf.int64)
    return tf.stack([seed, tf.zeros_like(seed)]) if seed.shape.rank == 0 else seed


def sample_ids(
    model: Transformer,
    source_ids,
    options: SearchOptions,
    method: str = "greedy",
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=0,
    pad_kernels: bool | None = None,
    transpose_kernels: bool = False,
    rows=None,
    bisect: bool = False,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Greedy or sampled decoding of right-padded source ids, TF ops only: the sampling
    counterpart of `search_ids` (same source preparation and output length limits, taken from
    `options`; `method` and knobs as in `decoding.sampling.SamplingOptions`, seed an int or a
    pair; `pad_kernels`, `transpose_kernels` and `rows` as in `decode_sources`: padding rows
    draw tokens of their own, so unlike beam search's copies they would not finish with the
    row they copy; `bisect`: `SamplingOptions.bisect`, for XLA).

    Returns int32 `(batch, max_len)` ids without BOS, `pad_id` after EOS, and float32
    `(batch,)` scores log P(y | x) / lp(|y|) with `options.alpha`, as beam search scores."""
    config = model.config
    sampling = SamplingOptions(
        method, top_k, top_p, temperature, seed=seed_pair(seed), bisect=bisect
    )
    ids, log_probs = decode_sources(
        model, source_ids, options, Sampling(sampling), pad_kernels, transpose_kernels, rows
    )
    ids = ids[:, 1:]  # drop BOS -> (batch, max_len)
    length = tf.reduce_sum(tf.cast(tf.not_equal(ids, config.pad_id), tf.int32), axis=1)
    return ids, log_probs / length_penalty(length, options.alpha)


def warn_if_truncated(lengths, max_length: int) -> bool:
    """Eagerly, log one warning if some source lengths `(batch,)` (EOS included) exceed
    `max_length`; returns whether it did (never when traced: an export truncates silently)."""
    if not tf.executing_eagerly():
        return False
    count = int(np.sum(np.asarray(lengths) > max_length))
    if count:
        logger.warning(
            "%d source(s) longer than the model's max_length=%d tokens were truncated to "
            "max_length.", count, max_length,
        )  # fmt: skip
    return bool(count)


def translate_ids(
    model: Transformer, source_ids, search: SearchOptions | None = None
) -> tuple[tf.Tensor, tf.Tensor]:
    """Beam-search translations of right-padded source ids (see the module docstring for
    lengths, truncation and empty sources).

    Args:
        model: a `Transformer` (its `config` gives the special ids and max_length).
        source_ids: int `(batch, src_len)`, `pad_id` after each source's EOS, or ragged.
        search: beam size, alpha, extra length, n-best, padded decoding, early stopping
            (default: the paper's settings, `SearchOptions()`).

    Returns:
        `(ids, scores)`: int32 `(batch, len)` and float32 `(batch,)` when `search.n_best` is
        1, else `(batch, n_best, len)` and `(batch, n_best)`, best first. Ids exclude BOS,
        end with EOS (unless cut by the length limit) and are padded with `pad_id`; trailing
        all-pad columns are dropped. Scores are log P(y | x) / ((5 + |y|) / 6) ** alpha, |y|
        counting EOS.
    """
    config = check_model(model).config
    search = search or SearchOptions()
    if tf.executing_eagerly():
        dense = source_ids
        if isinstance(dense, tf.RaggedTensor):
            dense = dense.to_tensor(default_value=config.pad_id)
        warn_if_truncated(np.sum(np.asarray(dense) != config.pad_id, axis=-1), config.max_length)
    ids, scores = search_ids(model, source_ids, search)
    used = tf.reduce_any(tf.not_equal(ids, config.pad_id), axis=[0, 1])  # (len,)
    width = tf.reduce_max(tf.concat([tf.where(used)[:, 0] + 1, [0]], 0))
    ids = ids[:, :, :width]  # -> (batch, n_best, width)
    if search.n_best == 1:
        return ids[:, 0], scores[:, 0]  # -> (batch, width), (batch,)
    return ids, scores


def default_pad_kernels(padded_decode: bool) -> bool:
    """Whether a `Translator` pads the decoder's kernels by default: this machine's rule
    (`padded_kernels.default_pad_kernels`), for the growing search only."""
    return padded_kernels.default_pad_kernels() and not padded_decode


def default_transpose_kernels(d_model: int, jit_compile: bool) -> bool:
    """Whether a `Translator` of a model of width `d_model` reads the decoder's kernels
    transposed by default: under XLA only, this machine's rule
    (`incremental.transposed_kernels_pay`)."""
    return jit_compile and incremental.transposed_kernels_pay(d_model)


class Translator(tf.Module):
    """Strings in, strings out: in-graph sentence segmentation, SentencePiece, cached beam
    search (or sampling) and detokenization.

    Each input is a whole text (a sentence, a paragraph, a document): it is split into
    sentences, the sentences of a batch are translated together in length-sorted batches,
    and each input's translations are joined back with its own whitespace; an input's score
    is the sum of its sentences' scores (`decoding.documents`; `documents` sets how).

    Args:
        model: a `Transformer`.
        tokenizer: the model's `SubwordTokenizer`.
        search: `SearchOptions` (default: the paper's); its `n_best` is ignored (each call
            says how many it wants).
        jit_compile: XLA-compile the numeric search (needs `search.padded_decode`; compiles
            once per batch size and source width). Tokenization always runs outside it.
        documents: `DocumentOptions` (default: segment, split overlong sentences);
            `DocumentOptions.sentences()` sends each input whole and truncates, as before.
        pad_kernels: whether searches multiply by padded copies of the decoder's weights
            (`decoding.padded_kernels`: the same translations, faster on CPUs whose oneDNN
            products stop at AVX2); None: `padded_kernels.default_pad_kernels()`, decided
            here once (an export keeps the choice of the machine that traced it unless
            `KERAS_TRANSFORMER_PAD_KERNELS` says otherwise).
        transpose_kernels: with `jit_compile`, whether the fixed step reads the decoder's
            kernels in `(out, in)` order (`incremental.fixed_shape_step`: the same
            translations, faster on some CPUs); None: `incremental.transposed_kernels_pay`,
            decided here once (`KERAS_TRANSFORMER_TRANSPOSE_KERNELS` overrides it). Never
            without XLA.
        alignment: `AlignmentOptions`, the cross-attention that word alignments read
            (markup, `--alignments`); default the unguided model's best
            (`artifacts.run_alignment` gives a run's: its guided head where it trained one).

    Example:
    >>> translator = Translator(model, tokenizer)
    >>> translator(["Hello world. How are you?"])           # ["Hallo Welt. Wie geht es?"]
    >>> texts, scores = translator.translate(lines, batch_size=64)
    >>> translator.translate_tensors(tf.constant(["Hi"]))  # {"translations", "scores"}
    >>> texts, scores = translator.sample(lines, method="top_k", top_k=10, seed=3)
    """

    def __init__(
        self,
        model: Transformer,
        tokenizer,
        search: SearchOptions | None = None,
        jit_compile: bool = False,
        name: str | None = None,
        documents: DocumentOptions | None = None,
        pad_kernels: bool | None = None,
        alignment: AlignmentOptions | None = None,
        transpose_kernels: bool | None = None,
    ):
        super().__init__(name=name)
        search = search or SearchOptions()
        if jit_compile and not search.padded_decode:
            raise ValueError("jit_compile=True needs padded_decode=True (static shapes).")
        self.model = check_model(model)
        self.tokenizer = tokenizer
        self.config = model.config
        self.options = search.replace(n_best=1)
        self.documents = documents or DocumentOptions()
        self.alignment = alignment or AlignmentOptions()
        self.jit_compile = jit_compile
        if pad_kernels is None:
            pad_kernels = default_pad_kernels(search.padded_decode)
        self.pad_kernels = pad_kernels
        if transpose_kernels is None:
            transpose_kernels = default_transpose_kernels(model.config.d_model, jit_compile)
        self.transpose_kernels = bool(jit_compile and transpose_kernels)
        self._searches = {}  # "n_best_<k>" / "sample_<method>" -> tf.function over source ids
        self._warned = False
        self._ranks = None

    def search_function(self, n_best: int = 1):
        """The `tf.function` (XLA if `jit_compile`) mapping int32 source ids `(batch,
        src_len)` to `(ids (batch, n_best, len), scores (batch, n_best))`."""
        key = f"n_best_{n_best}"  # string keys: a tracked dict must be saveable
        if key not in self._searches:
            options = self.options.replace(n_best=n_best)
            self._searches[key] = tf.function(
                lambda source: search_ids(
                    self.model, source, options, self.pad_kernels, self.transpose_kernels
                ),
                input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")],
                jit_compile=self.jit_compile,
            )
        return self._searches[key]

    def sample_function(self, method: str):
        """The `tf.function` (XLA if `jit_compile`) of `sample_ids` for `method` ("greedy" or
        "sample"): `(source_ids int32 (batch, src_len), temperature float32 (), top_k int32 (),
        top_p float32 (), seed int64 (2,), rows int32 ())` -> `(ids (batch, len), scores
        (batch,))`; `rows`: the sources to decode (the others are padding rows)."""
        key = f"sample_{method}"
        if key not in self._searches:
            specs = [
                tf.TensorSpec([None, None], tf.int32, name="source_ids"),
                tf.TensorSpec([], tf.float32, name="temperature"),
                tf.TensorSpec([], tf.int32, name="top_k"),
                tf.TensorSpec([], tf.float32, name="top_p"),
                tf.TensorSpec([2], tf.int64, name="seed"),
                tf.TensorSpec([], tf.int32, name="rows"),
            ]
            self._searches[key] = tf.function(
                lambda source, temperature, top_k, top_p, seed, rows: sample_ids(
                    self.model,
                    source,
                    self.options,
                    method,
                    temperature,
                    top_k,
                    top_p,
                    seed,
                    self.pad_kernels,
                    self.transpose_kernels,
                    rows,
                    bisect=self.jit_compile,
                ),
                input_signature=specs,
                jit_compile=self.jit_compile,
            )
        return self._searches[key]

    def _xla_width(self, source):
        """`source` padded to `XLA_WIDTH_MULTIPLE` columns under XLA, else as it is."""
        return pad_width(source, XLA_WIDTH_MULTIPLE) if self.jit_compile else source

    def _xla_search(self, search, source) -> tuple[tf.Tensor, tf.Tensor]:
        """`search(source)`; under XLA on the source padded to its width and batch buckets,
        the padding rows' results dropped: `(ids (batch, ...), scores (batch, ...))`."""
        if not self.jit_compile:
            return search(source)
        batch = tf.shape(source)[0]
        ids, scores = search(pad_rows(self._xla_width(source)))
        return ids[:batch], scores[:batch]

    def _warn_if_truncating(self, text) -> None:
        """Eagerly, once: warn that some inputs will be cut (`overlong="truncate"` only)."""
        if self._warned or self.documents.overlong != "truncate" or not tf.executing_eagerly():
            return
        texts = tf.convert_to_tensor(text, tf.string)
        if self.documents.segment:
            from keras_transformer.data.segmenter import segment

            texts = segment(texts).segments.flat_values
        lengths = self.tokenizer.tokenize(texts).row_lengths() + 1  # with EOS
        self._warned = warn_if_truncated(lengths, self.config.max_length)

    def _translate_whole(self, text, run, k: int) -> tuple[tf.Tensor, tf.Tensor]:
        """`decoding.documents.translate_documents` with this translator's parts; `run`
        returns `k` translations per source."""
        if self._ranks is None:
            self._ranks = cut_ranks(self.tokenizer.model_proto)
        self._warn_if_truncating(text)
        return translate_documents(
            text, self.tokenizer.tokenize, run, self.documents, self.config.max_length,
            self._ranks, self.config.eos_id, k,
        )  # fmt: skip

    def translate_tensors(self, text) -> dict:
        """String `(batch,)` -> `{"translations": string (batch,), "scores": float32 (batch,)}`.

        TF ops only: traceable in a `tf.function` with an input signature (for export)."""
        out = self.translate_tensors_n_best(text, n_best=1)
        return {"translations": out["translations"][:, 0], "scores": out["scores"][:, 0]}

    def translate_tensors_n_best(self, text, n_best: int | None = None) -> dict:
        """String `(batch,)` -> the `n_best` (default beam_size) best translations, best first:
        `{"translations": string (batch, n_best), "scores": float32 (batch, n_best)}`."""
        n_best = self.options.beam_size if n_best is None else n_best
        search = self.search_function(n_best)

        def run(source, _):
            ids, scores = self._xla_search(search, source)  # (b, n_best, len), (b, n_best)
            shape = tf.shape(ids)
            flat = tf.reshape(ids, [shape[0] * shape[1], shape[2]])  # -> (b * n_best, len)
            texts = tf.reshape(self.tokenizer.detokenize(flat), shape[:2])  # -> (b, n_best)
            return texts, scores

        texts, scores = self._translate_whole(text, run, n_best)
        return {"translations": texts, "scores": scores}

    def translate_markup_tensors(self, text) -> dict:
        """String `(batch,)` with inline tags -> `{"translations", "scores", "alignments",
        "warnings"}` (batch,): tags put back around the aligned words, protected spans
        verbatim (`decoding.markup_translation`); TF ops only (the export's
        `translate_markup`)."""
        from keras_transformer.decoding.alignments import word_start_table
        from keras_transformer.decoding.markup_translation import translate_markup

        if getattr(self, "_starts", None) is None:
            self._starts = word_start_table(self.tokenizer.model_proto)
        return translate_markup(self, text, self._starts)

    def translate_guided_tensors(self, text, prefix=None, constraints=None, avoid=None,
                                 glossary=None, alternatives: int = 0) -> dict:  # fmt: skip
        """String `(batch,)` inputs and guides (a target prefix, tab-separated constraints and
        phrases to avoid, glossary lines) -> `{"translations", "scores", "constraints_met"}`
        `(batch,)`, or `(batch, alternatives)`: `decoding.guided.translate_guided`."""
        from keras_transformer.decoding.guided import translate_guided

        return translate_guided(self, text, prefix, constraints, avoid, glossary, alternatives)

    def sample_tensors(
        self, text, method: str = "sample", temperature=1.0, top_k=0, top_p=1.0, seed=0
    ) -> dict:
        """String `(batch,)` -> `{"translations": string (batch,), "scores": float32 (batch,)}`
        by greedy decoding or sampling; TF ops only (the export's `translate_sample`).

        Args:
            method: "greedy" (argmax; the knobs are ignored), "top_k" (top_p off), "top_p"
                (top_k off) or "sample" (both filters as given, each off by default).
            temperature: > 0, divides the logits before filtering.
            top_k: keep the k most likely tokens; 0 turns the filter off (1 is greedy).
            top_p: keep the nucleus of probability mass p in (0, 1]; 1 turns it off.
            seed: int or int scalar tensor (or an int64 `(2,)` pair): the same seed and batch
                give the same translations. Under XLA the rows are padded to a power of two
                (as for beam search, one compile per bucket), so the draws are the padded
                batch's.

        Python values are checked here (ValueError); tensors (a served request) by assertions
        in the graph (InvalidArgumentError). Scores are log P(y | x) / lp(|y|), the model's
        untempered log-probabilities with the length penalty of the search options.
        """
        check_sampling_args(method, top_k, top_p, temperature)
        if method == "top_k":
            method, top_p = "sample", 1.0
        elif method == "top_p":
            method, top_k = "sample", 0
        temperature = tf.cast(temperature, tf.float32)
        top_k, top_p = tf.cast(top_k, tf.int32), tf.cast(top_p, tf.float32)
        checks = [
            tf.debugging.assert_positive(temperature, message="temperature must be > 0"),
            tf.debugging.assert_non_negative(top_k, message="top_k must be >= 0 (0: off)"),
            tf.debugging.assert_positive(top_p, message="top_p must be in (0, 1]"),
            tf.debugging.assert_less_equal(top_p, 1.0, message="top_p must be in (0, 1]"),
        ]
        with tf.control_dependencies(checks):
            text = tf.identity(tf.convert_to_tensor(text, tf.string))
        function = self.sample_function("greedy" if method == "greedy" else "sample")
        seed = seed_pair(seed)

        def run(source, batch_index):
            # Search batch i draws with [seed0, seed1 + i * 2**32]: batch 0 with the seed given.
            offset = tf.cast(batch_index, tf.int64) * 2**32
            draws, rows = seed + [0, offset], tf.shape(source)[0]
            ids, scores = self._xla_search(
                lambda padded: function(padded, temperature, top_k, top_p, draws, rows), source
            )  # fmt: skip  # under XLA: width and batch buckets, as beam search
            return self.tokenizer.detokenize(ids)[:, None], scores[:, None]  # -> (b, 1)

        texts, scores = self._translate_whole(text, run, 1)
        return {"translations": texts[:, 0], "scores": scores[:, 0]}

    def __call__(
        self, texts: Sequence[str] | str, n_best: int | None = None, return_scores: bool = False
    ):
        """Translate one batch of strings.

        Returns a list of strings (with `n_best`: a list of `n_best` strings per text, best
        first), and with `return_scores` also the matching scores."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not texts:
            return ([], []) if return_scores else []
        out = self.translate_tensors_n_best(tf.constant(texts), n_best=n_best or 1)
        translations = [[t.decode("utf-8") for t in row] for row in out["translations"].numpy()]
        scores = out["scores"].numpy().tolist()
        if n_best is None:
            translations, scores = [row[0] for row in translations], [row[0] for row in scores]
        return (translations, scores) if return_scores else translations

    def translate(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        n_best: int | None = None,
        progress: bool = False,
    ) -> tuple[list, list]:
        """Translate many strings in batches of similar length (sorted by subword length,
        results put back in input order): `(translations, scores)` as `__call__` returns."""
        return self._in_batches(
            texts, batch_size, progress,
            lambda batch, _: self(batch, n_best=n_best, return_scores=True),
        )  # fmt: skip

    def sample(
        self,
        texts: Sequence[str],
        method: str = "sample",
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        batch_size: int = 64,
        progress: bool = False,
    ) -> tuple[list[str], list[float]]:
        """Greedy decoding or sampling of many strings (see `sample_tensors` for the method
        and knobs), in batches of similar length, results in input order:
        `(translations, scores)`. Batch b draws with the seed pair `[seed, b]`, so the same
        seed, texts and batch size give the same translations (the first batch as the export's
        `translate_sample` does for that batch and seed)."""
        check_sampling_args(method, top_k, top_p, temperature)
        check_int("seed", seed, minimum=None)

        def run(batch: list[str], index: int):
            out = self.sample_tensors(
                tf.constant(batch), method, temperature, top_k, top_p,
                tf.constant([seed, index], tf.int64),
            )  # fmt: skip
            outputs = [t.decode("utf-8") for t in out["translations"].numpy()]
            return outputs, out["scores"].numpy().tolist()

        return self._in_batches(texts, batch_size, progress, run)

    def _in_batches(self, texts, batch_size, progress, run) -> tuple[list, list]:
        """`run(batch_texts, batch_index) -> (outputs, scores)` over batches of similar
        subword length (sorted, stable), results put back in input order."""
        check_int("batch_size", batch_size)
        texts = list(texts)
        if not texts:
            return [], []
        lengths = self.tokenizer.tokenize(tf.constant(texts)).row_lengths().numpy()
        order = np.argsort(lengths, kind="stable")  # batch similar lengths together
        outputs, scores = [None] * len(texts), [None] * len(texts)
        starts = range(0, len(texts), batch_size)
        if progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc="translating", unit="batch")
        for number, start in enumerate(starts):
            index = order[start : start + batch_size]
            batch = run([texts[i] for i in index], number)
            for i, output, score in zip(index, *batch):
                outputs[i], scores[i] = output, score
        return outputs, scores
