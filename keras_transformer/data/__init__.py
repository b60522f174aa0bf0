"""Data: corpora, tokenizers and tf.data input pipelines."""
