"""Corpus helpers for tests: the pairs a `tf.data` corpus yields, and a fake TFDS WMT split.

with tfds.testing.mock_data(as_dataset_fn=split_tagged_dataset):
    pairs = list(read_pairs("wmt14_en_de", "test", data_dir=tmp_dir))
"""

from __future__ import annotations

import tensorflow as tf


def numpy_pairs(dataset: tf.data.Dataset) -> list[tuple[str, str]]:
    """The `(source, target)` strings of a dataset of `{"source": (), "target": ()}` strings."""
    return [(x["source"].decode(), x["target"].decode()) for x in dataset.as_numpy_iterator()]


def split_tagged_dataset(builder, split, **kwargs) -> tf.data.Dataset:
    """A fake TFDS `_as_dataset` (`tfds.testing.mock_data(as_dataset_fn=...)`): every text names
    its language and the TFDS split asked for (`"de validation 0"`), three pairs a split, then
    pairs the corpus readers drop: an empty source, then an over-long target (> 20 characters).
    """
    del kwargs
    languages = builder.builder_config.language_pair  # e.g. ("de", "en")
    texts = {lang: [f"{lang} {split} {i}" for i in range(3)] for lang in languages}
    texts["en"] += ["", "en long"]  # dropped: empty source, then over-long target
    for lang in languages:
        if lang != "en":
            texts[lang] += ["nonempty", "x" * 50]
    return tf.data.Dataset.from_tensor_slices(texts)
