"""Train a Transformer translator: `python pipelines/train_wmt.py --help`.

The same command as `keras-transformer-train`; the code is `keras_transformer.cli.train`
(the library: `keras_transformer.training`).
"""

import sys

from keras_transformer.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
