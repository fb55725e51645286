"""What a quiet Flower simulation holds back from the user's terminal (``flower run --quiet`` or
``--json``): Flower's own log below ERROR (its per-round INFO lines and its notice that
``run_simulation`` is deprecated), Ray's ``FutureWarning`` about GPU environment variables (no GPU is
used), and the ClientApp actors' log lines Ray forwards to the driver. Errors still show, and a
client's error reply fails the run (``engine_app.simulate``)."""

from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Iterator

from flwr.common.logger import FLOWER_LOGGER

QUIET_RAY_INIT = {"log_to_driver": False}
"""``ray.init`` arguments of a quiet simulation: the actors' log lines stay in Ray's log files."""


@contextlib.contextmanager
def quiet_flower() -> Iterator[None]:
    """Flower's logger at ERROR and Ray's FutureWarnings ignored while the block runs; restored after."""
    level = FLOWER_LOGGER.level
    FLOWER_LOGGER.setLevel(max(level, logging.ERROR))
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray\.")
            yield
    finally:
        FLOWER_LOGGER.setLevel(level)
