"""The shared thread pool for numpy work that releases the GIL (BLAS, casts, sorts, random draws)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable


THREADS: int | None = None  # threads for thread_map; None: decided per process by thread_count()
PARALLEL_ROWS = 1 << 16  # below this many feature rows a round's parts run serially (threads cost more)
_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}  # per (process id, threads): a forked child starts its own


def thread_count() -> int:
    """``THREADS`` if set, else the usable cores (at most 4) -- but one inside a worker process
    of a pool (``fltr-audit campaign`` already runs one process per core)."""
    if THREADS is not None:
        return max(1, int(THREADS))
    if multiprocessing.parent_process() is not None:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(4, cores))


def thread_map(fn: Callable[..., Any], *iterables: Any, rows: int | None = None) -> list:
    """``[fn(*args) for args in zip(*iterables)]`` on a shared pool of ``thread_count()`` threads.

    For numpy work that releases the GIL (BLAS, casts, sorts, random draws). Each call must
    be independent of the others -- it may write only its own part of a shared output --
    so the results are the same for any number of threads. ``rows``, the feature rows the
    calls touch, runs them serially when below ``PARALLEL_ROWS``.
    """
    n = thread_count()
    if n == 1 or (rows is not None and rows < PARALLEL_ROWS):
        return [fn(*args) for args in zip(*iterables)]
    key = (os.getpid(), n)
    if key not in _POOLS:
        _POOLS[key] = ThreadPoolExecutor(n, thread_name_prefix="fltr-audit")
    return list(_POOLS[key].map(fn, *iterables))


def row_parts(n: int, per_thread: int = 1) -> list[slice]:
    """``range(n)`` cut into ``per_thread`` contiguous slices per thread, in order (for ``thread_map``)."""
    parts = min(thread_count() * per_thread, max(n, 1))
    bounds = [n * i // parts for i in range(parts + 1)]
    return [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
