"""Average the last checkpoints of a run: `python pipelines/average_checkpoints.py --help`.

The same command as `keras-transformer-average-checkpoints`; the code is
`keras_transformer.cli.average_checkpoints`.
"""

import sys

from keras_transformer.cli.average_checkpoints import main

if __name__ == "__main__":
    sys.exit(main())
