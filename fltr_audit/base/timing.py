"""Timing for the bench commands (no numpy: the CLI may import it at start-up)."""

from __future__ import annotations

import time
from typing import Any, Callable


def best_seconds(fn: Callable[[], Any], repeats: int) -> float:
    """Best wall time of ``repeats`` calls of ``fn``, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
