"""Export a trained model for TF Serving: `python export/export_savedmodel.py --help`.

The same command as `keras-transformer-export`; the code is `keras_transformer.cli.export`
(the library: `keras_transformer.serving.export`).
"""

import sys

from keras_transformer.cli.export import main

# pipelines/train_wmt.py imports export_savedmodel from here until it moves into the package.
from keras_transformer.serving.export import export_savedmodel  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
