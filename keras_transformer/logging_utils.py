"""Console logging for the entry scripts: our logger at INFO, everything else (TensorFlow's
own chatter) at WARNING."""

from __future__ import annotations

import logging


def setup_logging(level: int = logging.INFO) -> logging.Logger:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logger = logging.getLogger("keras_transformer")
    logger.setLevel(level)
    return logger
