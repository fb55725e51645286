"""A binary cache of parsed LETOR files and of large synthetic data sets.

An entry is one uncompressed ``.npz`` (features, labels, offsets, qids, levels, doc ids)
under ``$FLTR_AUDIT_CACHE`` (default ``~/.cache/fltr-audit``): for a file,
``<hash of path>-<hash of size, mtime, format>.npz``, so a changed file gets a new key; for
a synthetic set, ``synthetic-<hash of profile, queries, seed>-<hash of format>.npz``.
Writing an entry removes the stale entries of the same source. Entries are written to a
temporary file and renamed, so a crash never leaves a half-written entry; an unreadable
entry is built again. When the cache folder cannot be written the data is simply not cached.

Features are memory-mapped copy-on-write from the entry (the member of an uncompressed
``.npz`` is a plain ``.npy`` at a known offset): loading costs no copy, pages are read
when touched and are shared with other processes reading the same entry, and in-place
normalization writes private pages, never the entry. Each member's data starts at a multiple
of 64 bytes of the file (a padding field in its zip header), so the mapped features are
aligned (numpy's and BLAS's fast paths need aligned float32); an entry written without that
alignment is built again.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fltr_audit.base.atomic import write_with
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.base.untrusted_npz import Rule, read_npz

_FORMAT = "1"
SYNTHETIC_MIN_BYTES = 64 << 20
"""Synthetic sets with at least this many feature bytes are cached (smaller ones generate faster than they load)."""


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


def cached_synthetic(name: str, queries: int | None, seed: int, generate: Callable[[], Dataset],
                     n_bytes: int, generator: str) -> Dataset:
    """``generate()`` (the synthetic set ``name`` of ``queries`` queries and ``seed`` made by the
    generator of version ``generator``), answered from the cache when it was generated before; only
    sets of ``n_bytes`` >= SYNTHETIC_MIN_BYTES are cached."""
    if n_bytes < SYNTHETIC_MIN_BYTES:
        return generate()
    who = "synthetic-" + hashlib.sha256(f"{name}|{queries}|{seed}|{generator}".encode()).hexdigest()[:20]
    entry = cache_dir() / f"{who}-{hashlib.sha256(_FORMAT.encode()).hexdigest()[:20]}.npz"
    if entry.is_file():
        try:
            return _load(entry, name=f"synthetic:{name}")
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            pass
    ds = generate()
    try:
        _store(ds, entry, who)
    except (OSError, FltrError):
        pass
    return ds


_ENTRY_ARRAYS = {"features": Rule("f", np.float32, 2), "labels": Rule("iu", np.int8, 1),
                 "query_ptr": Rule("iu", np.int64, 1), "qids": Rule("iu", np.int64, 1),
                 "n_levels": Rule("iu", np.int64, 0), "doc_ids": Rule("U", None, 1)}


def _load(entry: Path, name: str) -> Dataset:
    """The data set of a cache entry: every header checked and the arrays held in memory (all but
    the mapped features) within the machine's memory before any is read (``untrusted_npz``);
    FltrError (a ValueError: the entry is rebuilt) when they do not fit together."""
    z = read_npz(entry, _ENTRY_ARRAYS, ("features", "labels", "query_ptr", "qids", "n_levels"), budget=None,
                 skip=("features",))
    features, ptr = _mapped(entry, "features"), z["query_ptr"]
    n_docs = features.shape[0]
    if (len(z["labels"]) != n_docs or len(ptr) != len(z["qids"]) + 1 or not len(ptr) or ptr[0] != 0
            or ptr[-1] != n_docs or "doc_ids" in z and len(z["doc_ids"]) != n_docs):
        raise FltrError(f"{entry}: arrays that do not fit together")
    return Dataset(features=features, labels=z["labels"], query_ptr=ptr, qids=z["qids"], n_levels=int(z["n_levels"]),
                   name=name, doc_ids=z.get("doc_ids"))


def _mapped(entry: Path, member: str) -> np.ndarray:
    """The array ``member`` of the uncompressed ``.npz`` ``entry``, memory-mapped copy-on-write."""
    with zipfile.ZipFile(entry) as zf:
        info = zf.getinfo(f"{member}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"{entry}: {member} is compressed")
    with open(entry, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)
        if local[:4] != b"PK\x03\x04":
            raise ValueError(f"{entry}: bad local header of {member}")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        fh.seek(info.header_offset + 30 + name_len + extra_len)
        version = np.lib.format.read_magic(fh)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(fh)
        offset = fh.tell()
    if offset % _ALIGN:
        raise ValueError(f"{entry}: {member} is not aligned to {_ALIGN} bytes (an entry of an older writer)")
    if int(np.prod(shape)) == 0:
        return np.empty(shape, dtype=dtype)
    return np.memmap(entry, dtype=dtype, mode="c", shape=shape, offset=offset,
                     order="F" if fortran else "C").view(np.ndarray)


_ALIGN = 64
_PADDING_FIELD = 0x6166  # zip extra-field id of the alignment padding (ignored by readers)


def _write_npz(fh: Any, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` (uncompressed, zip64 members) with each member's ``.npy`` starting at a multiple
    of ``_ALIGN`` bytes: the local header's extra field is padded (the ``.npy`` header itself pads
    the data to a multiple of 64 bytes from its own start)."""
    with zipfile.ZipFile(fh, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, value in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            name = len(info.filename.encode())
            # local header: 30 bytes + name + extra (padding field: 4 + pad) + the zip64 field (20)
            pad = -(fh.tell() + 30 + name + 4 + 20) % _ALIGN
            info.extra = struct.pack("<HH", _PADDING_FIELD, pad) + bytes(pad)
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def _store(ds: Dataset, entry: Path, who: str) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    arrays = dict(
        features=ds.features, labels=ds.labels, query_ptr=ds.query_ptr, qids=ds.qids,
        n_levels=np.int64(ds.n_levels),
    )
    if ds.doc_ids is not None:
        arrays["doc_ids"] = np.asarray(ds.doc_ids, dtype=str)
    write_with(entry, lambda fh: _write_npz(fh, arrays))
    for stale in entry.parent.glob(f"{who}-*.npz"):
        if stale != entry:
            stale.unlink(missing_ok=True)
