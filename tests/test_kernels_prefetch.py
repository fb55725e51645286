"""Software prefetch in FPDGD's scoring kernel (``fltr_audit.engine.kernels.prefetch``): a hint that
must change no value. What it can get wrong is where it points, which only speed shows; so the
reading-order cursor of ``block_scores`` is checked position by position, and its scores bit for bit
against the same arithmetic without it."""

import numba
import numpy as np

from fltr_audit.engine.kernels.prefetch import prefetch_row
from fltr_audit.engine.kernels.ranking import PREFETCH_ROWS, _dot_float32, _next_row, block_scores


@numba.njit
def _prefetch_every_row(X):
    for row in range(X.shape[0]):
        prefetch_row(X, row)


def test_prefetch_row_reads_and_writes_nothing_on_any_row_width():
    """Every row of arrays of 0, 1, 15, 16, 17 and 136 columns, float32, float64 and read-only
    (a memory-mapped feature matrix): the arrays are unchanged and nothing faults.
    Catches: a store where a prefetch was meant, an address computed past an empty row."""
    rng = np.random.default_rng(0)
    for width in (0, 1, 15, 16, 17, 136):
        for dtype in (np.float32, np.float64):
            X = rng.normal(size=(7, width)).astype(dtype)
            before = X.copy()
            _prefetch_every_row(X)
            X.setflags(write=False)
            _prefetch_every_row(X)
            assert np.array_equal(X, before)


def _reading_order(counts):
    return [(b, r) for b, m in enumerate(counts) for r in range(m)]


def test_next_row_walks_the_blocks_in_reading_order_past_empty_ones():
    """From each position, ``_next_row`` then one step gives the next (block, row) in the order
    ``block_scores`` reads them, skipping empty blocks, and ``len(counts)`` after the last one.
    Catches: an empty block prefetched (a row of the next query read as this one's), the last row
    of a block skipped, a walk that stops at the first empty block."""
    for counts in ([3, 0, 0, 2, 1, 0], [0, 0], [1], [5, 0, 4], [0, 2, 0]):
        counts = np.array(counts, dtype=np.int64)
        order = _reading_order(counts)
        block, row = 0, 0
        walked = []
        for _ in range(len(order) + 3):
            block, row = _next_row(counts, block, row)
            if block == len(counts):
                break
            walked.append((block, row))
            row += 1
        assert walked == order
        assert _next_row(counts, block, row)[0] == len(counts)


def test_block_scores_with_prefetch_are_the_plain_per_row_dot_products():
    """Blocks shorter and longer than ``PREFETCH_ROWS``, empty blocks, a block at the end of X:
    each score is ``_dot_float32`` of its row alone, bit for bit, and nothing past a block's
    count is written. Catches: the prefetch cursor advancing the scoring loop (a row skipped or
    scored twice), a write past the block."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(700, 136)).astype(np.float32)
    counts = np.array([0, 5, PREFETCH_ROWS + 9, 0, 1, 3 * PREFETCH_ROWS, 0, 40], dtype=np.int64)
    starts = rng.integers(0, 700 - counts.max(), len(counts)).astype(np.int64)
    starts[-1] = 700 - counts[-1]
    models = rng.normal(size=(len(counts), 136))
    out = np.full((len(counts), counts.max() + 2), -7.0)
    block_scores(X, starts, counts, models.astype(np.float32), models, 1e30, out)
    w32 = models.astype(np.float32)
    for i, (s, m) in enumerate(zip(starts, counts)):
        expected = [_dot_float32(X[s + j], w32[i]) for j in range(m)]
        assert np.array_equal(out[i, :m], np.array(expected, dtype=np.float64))
        assert (out[i, m:] == -7.0).all()
