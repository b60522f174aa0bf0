"""Score source-target pairs with a trained model: `python pipelines/score.py --help`.

The same command as `keras-transformer-score`; the code is `keras_transformer.cli.score`.
"""

import sys

from keras_transformer.cli.score import main

if __name__ == "__main__":
    sys.exit(main())
