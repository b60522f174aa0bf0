"""Tokenize a corpus once into sharded TFRecords: `python pipelines/prepare_data.py --help`.

The code is `keras_transformer.cli.prepare_data`.
"""

import sys

from keras_transformer.cli.prepare_data import main

if __name__ == "__main__":
    sys.exit(main())
