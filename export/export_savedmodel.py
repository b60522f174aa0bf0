"""Export a trained model for TF Serving: `python export/export_savedmodel.py --help`.

The same command as `keras-transformer-export`; the code is `keras_transformer.cli.export`
(the library: `keras_transformer.serving.export`).
"""

import sys

from keras_transformer.cli.export import main

if __name__ == "__main__":
    sys.exit(main())
