"""Writing LETOR text (``label qid:Q 1:x1 2:x2 ... #docid = D``, one line per document) that
``fltr_audit.engine.data.letor.read_letor`` reads back bit-identically."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Iterator

import numpy as np

from fltr_audit.base.atomic import write_with
from fltr_audit.engine.data.dataset import Dataset


def _exact_fixed6(features: np.ndarray) -> bool:
    """True when ``%.6f`` text reads back as the same float32 values.

    ``x * 1e6`` is exact in float64 for float32 ``x`` (24 + 14 significant bits), so
    ``rint(x * 1e6) / 1e6`` is the correctly rounded double of the 6-decimal text.
    """
    x = features.astype(np.float64)
    return bool(np.array_equal((np.rint(x * 1e6) / 1e6).astype(np.float32), features))


def _format_blocks(ds: Dataset, fmt: str | None = None) -> Iterator[bytes]:
    n, d = ds.features.shape
    fmt = fmt or ("%.6f" if _exact_fixed6(ds.features) else "%.9g")
    row_fmt = "%d qid:%d " + " ".join(f"{j + 1}:{fmt}" for j in range(d))
    row_fmt += " #docid = %s\n" if ds.doc_ids is not None else "\n"
    qid_rows = np.repeat(ds.qids, ds.docs_per_query)
    step = max(1, 200_000 // max(d, 1))
    for a in range(0, n, step):
        b = min(n, a + step)
        cols = [ds.labels[a:b].astype(np.int64).tolist(), qid_rows[a:b].tolist()]
        cols += ds.features[a:b].astype(np.float64).T.tolist()
        if ds.doc_ids is not None:
            cols.append([str(s) for s in ds.doc_ids[a:b]])
        yield "".join(row_fmt % row for row in zip(*cols)).encode()


def format_letor(ds: Dataset) -> bytes:
    """The LETOR text of ``ds`` (one line per document, ``#docid = ...`` when present).

    Features are written as ``%.6f`` (as MQ2008 is) when that reads back exactly, else as
    ``%.9g``, which round-trips any float32.
    """
    return b"".join(_format_blocks(ds))


def write_letor(ds: Dataset, path: str | os.PathLike) -> None:
    """Write ``ds`` as LETOR text (see :func:`format_letor`), atomically; gzip for ``.gz``."""
    path = Path(path)

    def fill(handle) -> None:
        sink = gzip.GzipFile(fileobj=handle, mode="wb") if path.name.endswith(".gz") else handle
        for block in _format_blocks(ds):
            sink.write(block)
        if sink is not handle:
            sink.close()

    write_with(path, fill)
