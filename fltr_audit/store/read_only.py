"""Opening a results store read-only without writing a byte beside it: the SQLite URI mode that
works where the store lies (a read-only file system, a folder this process may not write)."""

from __future__ import annotations

import os
from pathlib import Path

from fltr_audit.constraints import ParameterError


def read_only_mode(path: Path) -> str:
    """How to open the store read-only without writing a byte: ``mode=ro`` where SQLite can make
    or open the WAL index (``-shm``) beside it; ``immutable=1`` where it cannot -- a read-only file
    system, or a folder this process may not write -- and there is no write-ahead log holding
    commits the file lacks. A store with such a log in a folder we cannot write: ParameterError."""
    if read_only_fs(path):
        return "immutable=1"
    folder = path.resolve().parent
    if os.access(folder, os.W_OK):
        return "mode=ro"
    wal, shm = (Path(f"{path.resolve()}-{suffix}") for suffix in ("wal", "shm"))
    if not wal.exists() or wal.stat().st_size == 0:
        return "immutable=1"
    if shm.exists() and os.access(shm, os.R_OK):
        return "mode=ro"  # SQLite reads an existing WAL index read-only
    raise ParameterError("store", f"{path}: its write-ahead log ({wal.name}) holds commits, and without its "
                                  f"index ({shm.name}) it cannot be read in the read-only folder {folder}; copy the "
                                  "store with its -wal file to a folder you can write")


def read_only_fs(path: Path) -> bool:
    """Whether the file system holding ``path`` is mounted read-only."""
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False
