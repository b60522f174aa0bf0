"""Word-align a training split with eflomal: `python pipelines/align_corpus.py --help`.

The code is `keras_transformer.cli.align_corpus`.
"""

import sys

from keras_transformer.cli.align_corpus import main

if __name__ == "__main__":
    sys.exit(main())
