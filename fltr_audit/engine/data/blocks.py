"""Blocks of whole queries, so that work on a large feature matrix never holds a whole-array
temporary (the synthetic generator and the normalizations share them)."""

from __future__ import annotations

import numpy as np

BLOCK_ROWS = 1 << 16
"""Rows the generator and the normalizations work on at a time (bounds their temporaries). The
generator's latent mixture goes to BLAS a block at a time, so its last bits depend on this
constant: sets of up to this many documents are bit-identical to the whole-array generator of
earlier versions, larger ones differ by at most one unit of the 6-decimal rounding."""


def query_blocks(ptr: np.ndarray, rows: int) -> list[tuple[int, int]]:
    """Consecutive query ranges ``(q0, q1)`` of about ``rows`` documents each (a query is never cut)."""
    n_q = len(ptr) - 1
    if n_q == 0:
        return []
    cuts = np.searchsorted(ptr, np.arange(rows, int(ptr[-1]), rows), side="right") - 1
    bounds = np.unique(np.r_[0, cuts[cuts > 0], n_q])
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
