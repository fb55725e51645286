"""``threads.row_parts``: the contiguous parts a cohort is cut into for the thread pool. Every
caller's result must not depend on the parts (the engine's thread-count tests), so what is checked
here is the cut itself: in order, covering every row once, as many parts as asked when there are
rows enough, never an empty part beyond what ``n = 0`` needs."""

from __future__ import annotations

import pytest

from fltr_audit.engine import threads


@pytest.mark.parametrize("threads_, per_thread", [(1, 1), (2, 1), (2, 4), (3, 4), (4, 2)])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 8, 9, 1000, 1001])
def test_parts_cover_the_rows_in_order(monkeypatch, threads_, per_thread, n):
    monkeypatch.setattr(threads, "THREADS", threads_)
    parts = threads.row_parts(n, per_thread=per_thread)
    assert [i for p in parts for i in range(p.start, p.stop)] == list(range(n))
    assert len(parts) == max(1, min(n, threads_ * per_thread))
    sizes = [p.stop - p.start for p in parts]
    assert n == 0 or (min(sizes) >= 1 and max(sizes) - min(sizes) <= 1)
