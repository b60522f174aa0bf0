"""Decode a test set and report BLEU and chrF: `python pipelines/evaluate.py --help`.

The same command as `keras-transformer-evaluate`; the code is `keras_transformer.cli.evaluate`.
"""

import sys

from keras_transformer.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
