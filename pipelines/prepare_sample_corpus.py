"""Rebuild the bundled sample corpus: `python pipelines/prepare_sample_corpus.py --help`.

The code is `keras_transformer.cli.prepare_sample_corpus`.
"""

import sys

from keras_transformer.cli.prepare_sample_corpus import main

if __name__ == "__main__":
    sys.exit(main())
