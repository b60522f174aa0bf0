"""Draw attention heat maps: `python pipelines/plot_attention.py --help`.

The same command as `keras-transformer-plot-attention`; the code is
`keras_transformer.cli.plot_attention`.
"""

import sys

from keras_transformer.cli.plot_attention import main

if __name__ == "__main__":
    sys.exit(main())
