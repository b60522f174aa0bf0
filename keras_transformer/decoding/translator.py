"""Translation strings in, strings out (`Translator`): in-graph segmentation and
SentencePiece around the id-level searches of `decoding.search` (beam search by default,
with the paper's settings; greedy decoding and top-k / top-p sampling through the same
object).

    translator = Translator(model, tokenizer, SearchOptions(beam_size=4))
    translator(["Hello world."])                                    # -> ["Hallo Welt."]
    translator.translate_tensors(tf.constant(["Hello world."]))     # pure TF, for export
    texts, scores = translator.sample(lines, method="top_p", top_p=0.9, seed=7)
    translator.sample_tensors(tf.constant(["Hi"]), top_k=k, seed=s)  # pure TF, for export

Lengths. `Translator` takes whole texts: it splits them into sentences and cuts a sentence
longer than `DocumentOptions.segment_limit` into parts (`decoding.documents`), so no input is
truncated unless `DocumentOptions(overlong="truncate")` asks for it; the searches' own
length rules are in `decoding.search`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.checks import check_int
from keras_transformer.config import AlignmentOptions, DocumentOptions, SearchOptions
from keras_transformer.decoding.documents import piece_table, translate_documents
from keras_transformer.decoding.sampling import check_sampling_args, sampling_tensors
from keras_transformer.decoding.search import (
    XLA_MAX_ROWS,
    XLA_WIDTH_MULTIPLE,
    check_model,
    default_pad_kernels,
    default_transpose_kernels,
    pad_rows,
    pad_width,
    sample_ids,
    search_ids,
    seed_pair,
    warn_if_truncated,
)
from keras_transformer.model import Transformer
from keras_transformer.tracing import graph_function


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
            once per batch size and source width). Beam search batches of more than
            `search.XLA_MAX_ROWS` rows run the growing search without XLA instead (the same
            translations; XLA's fixed buffers cost more there). Tokenization always runs
            outside it.
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
        store_output_kernel: with `jit_compile` (and kernels not transposed), keep `E^T`, the
            pre-softmax projection's `(d_model, vocab)` kernel, in a variable made here
            (`output_kernel`) instead of transposing the embedding in every XLA search: the
            same translations without a copy of the embedding a request, for a second copy of
            it in memory and in an export (measured: benchmarks/results/
            2026-11-29-issue-54-one-thread-split.md). The variable does not follow later
            changes of the model's weights: for exports (`serving.export`), whose weights
            never change.

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
        store_output_kernel: bool = False,
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
        if pad_kernels is None:  # the growing search's (a jit translator's larger batches)
            pad_kernels = default_pad_kernels(search.padded_decode and not jit_compile)
        self.pad_kernels = pad_kernels
        if transpose_kernels is None:
            transpose_kernels = default_transpose_kernels(model.config.d_model, jit_compile)
        self.transpose_kernels = bool(jit_compile and transpose_kernels)
        self.output_kernel = None  # E^T (d_model, vocab) in the compute dtype, or None
        if store_output_kernel and jit_compile and not self.transpose_kernels:
            self.output_kernel = tf.Variable(
                model.token_embedding.output_kernel(), trainable=False, name="output_kernel"
            )
        self._searches = {}  # "n_best_<k>" / "sample_<method>" -> tf.function over source ids
        self._warned = False
        self._ranks = None

    def search_function(self, n_best: int = 1, growing: bool = False):
        """The `tf.function` (XLA if `jit_compile`) mapping int32 source ids `(batch,
        src_len)` to `(ids (batch, n_best, len), scores (batch, n_best))`; `growing`: the
        growing-buffer search without XLA whatever `jit_compile` (a jit translator's batches
        of more than `XLA_MAX_ROWS` rows)."""
        key = f"n_best_{n_best}{'_growing' if growing else ''}"  # a tracked dict: str keys
        if key not in self._searches:
            options = self.options.replace(n_best=n_best)
            if growing:
                options = options.replace(padded_decode=False)
            transpose = self.transpose_kernels and not growing
            kernel = None if growing else self.output_kernel  # fixed buffers only
            self._searches[key] = graph_function(
                lambda source: search_ids(
                    self.model, source, options, self.pad_kernels, transpose, kernel
                ),
                input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")],
                jit_compile=self.jit_compile and not growing,
                # Not inlined: in `_xla_search`'s untaken branch it stays one call node; inlined,
                # the executor passed each of its ops a dead tensor, a one-sentence request's
                # cost (benchmarks/results/2026-11-29-issue-54-xla-rows.md).
                experimental_attributes={"_noinline": True} if growing else None,
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
            self._searches[key] = graph_function(
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
                    output_kernel=self.output_kernel,
                ),
                input_signature=specs,
                jit_compile=self.jit_compile,
            )
        return self._searches[key]

    def _xla_width(self, source):
        """`source` padded to `XLA_WIDTH_MULTIPLE` columns under XLA, else as it is."""
        return pad_width(source, XLA_WIDTH_MULTIPLE) if self.jit_compile else source

    def _xla_search(self, search, source, growing=None) -> tuple[tf.Tensor, tf.Tensor]:
        """`search(source)`; under XLA on the source padded to its width and batch buckets,
        the padding rows' results dropped: `(ids (batch, ...), scores (batch, ...))`. With
        `growing` (the same search without XLA), batches of more than `XLA_MAX_ROWS` rows
        run `growing(source)` instead (XLA's fixed buffers cost more there)."""
        if not self.jit_compile:
            return search(source)
        batch = tf.shape(source)[0]

        def fixed():
            ids, scores = search(pad_rows(self._xla_width(source)))
            return ids[:batch], scores[:batch]

        if growing is None:
            return fixed()
        return tf.cond(batch <= XLA_MAX_ROWS, fixed, lambda: growing(source))

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

    def _translate_whole(self, text, run, k: int, unique: bool = True) -> tuple:
        """`decoding.documents.translate_documents` with this translator's parts; `run`
        returns `k` translations per source (`unique`: a deterministic search)."""
        if self._ranks is None:
            self._ranks = piece_table(self.tokenizer.model_proto)
        self._warn_if_truncating(text)
        return translate_documents(
            text, self.tokenizer.tokenize, run, self.documents, self.config.max_length,
            self._ranks, self.config.eos_id, k, unique,
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
        growing = self.search_function(n_best, growing=True) if self.jit_compile else None

        def run(source, _):
            ids, scores = self._xla_search(search, source, growing)  # (b, n_best, len), (b, n_best)
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
        temperature, top_k, top_p, checks = sampling_tensors(temperature, top_k, top_p)
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

        texts, scores = self._translate_whole(text, run, 1, unique=False)
        return {"translations": texts[:, 0], "scores": scores[:, 0]}

    def __call__(
        self, texts: Sequence[str] | str, n_best: int | None = None, return_scores: bool = False
    ):
        """Translate one batch of strings.

        Returns a list of strings (with `n_best`: a list of `n_best` strings per text, best
        first), and with `return_scores` also the matching scores."""
        texts = text_list(texts)
        if n_best is not None:
            check_int("n_best", n_best)
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
        texts = text_list(texts)
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


def text_list(texts) -> list:
    """`texts` (a string, or a sequence of `str` or UTF-8 `bytes`) as a list; anything else
    is a TypeError that names it."""
    if isinstance(texts, (str, bytes)):
        return [texts]
    message = "texts must be a string or a sequence of strings (str or UTF-8 bytes). Received: "
    try:
        items = list(texts)
    except TypeError:
        raise TypeError(f"{message}texts={texts!r}") from None
    for item in items:
        if not isinstance(item, (str, bytes)):
            raise TypeError(f"{message}an element {item!r}")
    return items
