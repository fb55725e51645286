"""A binary cache of parsed LETOR files, keyed by the source file's path, size and mtime.

An entry is one uncompressed ``.npz`` (features, labels, offsets, qids, levels, doc ids)
named ``<hash of path>-<hash of size, mtime, format>.npz`` under ``$FLTR_AUDIT_CACHE``
(default ``~/.cache/fltr-audit``). A changed file gets a new key; writing an entry removes
the stale entries of the same path. Entries are written to a temporary file and renamed,
so a crash never leaves a half-written entry; an unreadable entry is parsed again. When
the cache folder cannot be written the data is simply not cached.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np

from fltr_audit.atomic import write_with
from fltr_audit.data.dataset import Dataset
from fltr_audit.errors import FltrError

_FORMAT = "1"


def cache_dir() -> Path:
    """The cache folder: ``$FLTR_AUDIT_CACHE`` or ``~/.cache/fltr-audit``."""
    env = os.environ.get("FLTR_AUDIT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fltr-audit"


def _entry(path: Path) -> tuple[str, Path]:
    src = path.resolve()
    st = src.stat()
    who = hashlib.sha256(str(src).encode()).hexdigest()[:20]
    version = hashlib.sha256(f"{st.st_size}|{st.st_mtime_ns}|{_FORMAT}".encode()).hexdigest()[:20]
    return who, cache_dir() / f"{who}-{version}.npz"


def cached_read(path: str | os.PathLike, reader: Callable[[Path], Dataset]) -> Dataset:
    """``reader(path)``, answered from the cache when the file is unchanged since caching."""
    path = Path(path)
    who, entry = _entry(path)
    if entry.is_file():
        try:
            return _load(entry, name=str(path))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            pass  # unreadable entry: parse again and overwrite it
    ds = reader(path)
    try:
        _store(ds, entry, who)
    except (OSError, FltrError):
        pass  # read-only or full cache folder: work without the cache
    return ds


def _load(entry: Path, name: str) -> Dataset:
    with np.load(entry, allow_pickle=False) as z:
        doc_ids = z["doc_ids"] if "doc_ids" in z.files else None
        return Dataset(
            features=z["features"],
            labels=z["labels"],
            query_ptr=z["query_ptr"],
            qids=z["qids"],
            n_levels=int(z["n_levels"]),
            name=name,
            doc_ids=doc_ids,
        )


def _store(ds: Dataset, entry: Path, who: str) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    arrays = dict(
        features=ds.features, labels=ds.labels, query_ptr=ds.query_ptr, qids=ds.qids,
        n_levels=np.int64(ds.n_levels),
    )
    if ds.doc_ids is not None:
        arrays["doc_ids"] = np.asarray(ds.doc_ids, dtype=str)
    write_with(entry, lambda fh: np.savez(fh, **arrays))
    for stale in entry.parent.glob(f"{who}-*.npz"):
        if stale != entry:
            stale.unlink(missing_ok=True)
