"""Query a TF Serving model server: `python export/client.py --help`.

The same command as `keras-transformer-client`; the code is `keras_transformer.cli.client`
(the library: `keras_transformer.serving.client`).
"""

import sys

from keras_transformer.cli.client import main

if __name__ == "__main__":
    sys.exit(main())
