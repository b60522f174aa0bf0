"""Convert a trained model to CTranslate2: `python export/to_ctranslate2.py --help`.

The code is `keras_transformer.cli.to_ctranslate2` (the library:
`keras_transformer.serving.ctranslate2_export`).
"""

import sys

from keras_transformer.cli.to_ctranslate2 import main

if __name__ == "__main__":
    sys.exit(main())
