"""What a run's data *is*, rather than where it lies: the identity audit streams are keyed by.

A run names its data by a spec (``synthetic:mq2008``, ``../shared/data/letor/MQ2008``). The run
key hashes that spec as written, so a store keeps one row per place; an audit's random stream
must not depend on the place, or the same data moved to another folder (another machine, a
clone beside the data) gives other audit figures for the same seed. ``data_identity`` is the spec
itself for synthetic data (generated from it) and the SHA-256 of the fold's files otherwise.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from fltr_audit.engine.data.load import fold_files


def data_identity(spec: str, fold: int) -> str:
    """``spec`` for synthetic data; ``sha256:<digest>`` of the names and contents of the files that
    fold ``fold`` of the path ``spec`` is read from (``load.fold_files``), computed once per process
    for unchanged files (about 1 s per GB)."""
    if spec.startswith("synthetic:"):
        return spec
    files = tuple(f.resolve() for f in fold_files(spec, fold))
    stats = [f.stat() for f in files]
    return _digest(files, tuple((st.st_size, st.st_mtime_ns) for st in stats))


@functools.lru_cache(maxsize=64)
def _digest(files: tuple[Path, ...], stamps: tuple[tuple[int, int], ...]) -> str:
    """The content digest of ``files`` (``stamps``, their sizes and times, key the memo)."""
    total = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            total.update(f"{f.name}\0".encode())
            total.update(hashlib.file_digest(fh, "sha256").digest())
    return "sha256:" + total.hexdigest()[:32]
