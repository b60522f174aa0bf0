"""Translate lines with a trained model: `python pipelines/translate.py --help`.

The same command as `keras-transformer-translate`; the code is `keras_transformer.cli.translate`.
"""

import sys

from keras_transformer.cli.translate import main

if __name__ == "__main__":
    sys.exit(main())
