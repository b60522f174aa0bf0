"""Check an export against the in-process Translator: `python export/verify_export.py --help`.

The same command as `keras-transformer-verify-export`; the code is
`keras_transformer.cli.verify_export` (the library: `keras_transformer.serving.verify`).
"""

import sys

from keras_transformer.cli.verify_export import main

if __name__ == "__main__":
    sys.exit(main())
