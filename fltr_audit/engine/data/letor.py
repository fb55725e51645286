"""Reading and writing LETOR / SVMlight text: ``label qid:N 1:v 2:v ... #comment``.

Reading has two fast paths and one slow one:

* dense files (every line lists features ``1..d`` in order, single spaces, as
  MQ2007/MQ2008/MSLR do) are tokenized by pandas' C parser in blocks of lines, after
  ``qid:`` is removed and ``:`` turned into a space; the feature-index columns are then
  checked to be exactly ``1..d`` on every line, which also catches any line with a
  different number of features (about 2.5 times faster than scikit-learn's reader);
* files that are not dense (zero features left out, as Yahoo! does) go through
  scikit-learn's ``load_svmlight_file(query_id=True)``;
* only when one of those rejects the file does a plain Python pass walk the lines to name
  the first bad one (``FILE, line 57: 45 features, expected 46``).

Feature ids run 1..d, d the file's width: the width of every line of a dense file, or the
majority width of a sparse one (the most common largest id of a line). An id beyond it, an id
0 or a token without a colon is an error naming the line, found before any array of the
file's width is allocated; d is at most ``MAX_FEATURES``. Query ids are integers 0..2^63-1.

Both ``.gz`` and plain text are read (recognized by the gzip magic bytes). Sizes are capped
while streaming, before anything of that size is held: a line longer than ``MAX_LINE_BYTES`` is
an error naming the line, and a gzip file that decompresses to more than ``MAX_GZIP_RATIO``
times its own size (beyond ``_RATIO_FLOOR`` bytes) is refused as a compression bomb.
"""

from __future__ import annotations

import gzip
import io
import math
import os
import re
import zlib
from pathlib import Path
from typing import Iterator, NoReturn

import numpy as np

from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError

_BLOCK = 1 << 25  # bytes per parsed block (32 MiB): bounds memory on MSLR-sized files
_TO_SPACE = bytes.maketrans(b":", b" ")
_DOCID = re.compile(rb"#\s*docid\s*=\s*(\S+)")
_MAX_LABEL = 127  # labels are stored as int8
MAX_FEATURES = 10_000  # widest LETOR set known: Yahoo! LTR, 700 features
_EXACT_QID = 2**53  # query ids read as float64 are exact below this
_MAX_QID = 2**63 - 1
MAX_LINE_BYTES = 1 << 20  # 1 MiB: 10,000 features of ~25 characters each, with room for comments
MAX_GZIP_RATIO = 100  # LETOR text compresses 4..10 times; a bomb of NULs, about 1,000 times
_RATIO_FLOOR = 64 << 20  # small files may compress better (repeated lines); judged beyond 64 MiB


class _CappedReader(io.RawIOBase):
    """A binary stream over ``raw`` that refuses to yield more than ``limit`` bytes."""

    def __init__(self, raw, path: Path, limit: int) -> None:
        self._raw, self._path, self._limit, self._seen = raw, path, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._raw.readinto(buffer)
        self._seen += n or 0
        if self._seen > self._limit:
            raise FltrError(f"{self._path}: decompresses to more than {MAX_GZIP_RATIO} times its size "
                            f"(over {self._limit >> 20} MiB; a compression bomb?)")
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def _open(path: Path):
    """The file's bytes (decompressed when gzip), capped against compression bombs."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic != b"\x1f\x8b":
        return open(path, "rb")
    limit = max(_RATIO_FLOOR, MAX_GZIP_RATIO * path.stat().st_size)
    return io.BufferedReader(_CappedReader(gzip.open(path, "rb"), path, limit), buffer_size=1 << 20)


def _blocks(path: Path) -> Iterator[bytes]:
    """The file's bytes in blocks that end at a line break; a line longer than
    ``MAX_LINE_BYTES`` is an error naming it (checked before the block grows past it)."""
    lines_before = 0
    with _open(path) as fh:
        rest = b""
        while True:
            chunk = fh.read(_BLOCK)
            if not chunk:
                if rest.strip():
                    yield rest + b"\n"
                return
            chunk = rest + chunk
            cut = chunk.rfind(b"\n")
            _check_line_lengths(path, chunk, lines_before)
            if cut < 0:
                rest = chunk
                continue
            rest = chunk[cut + 1 :]
            lines_before += chunk.count(b"\n", 0, cut + 1)
            yield chunk[: cut + 1]


def _check_line_lengths(path: Path, chunk: bytes, lines_before: int) -> None:
    """Raise naming the first line of ``chunk`` longer than ``MAX_LINE_BYTES`` (an unfinished
    last line included); ``lines_before`` lines of the file precede the chunk.

    Windows of half the cap are searched for a line break (memchr speed, no per-line work):
    when every window has one, no line reaches the cap; a window without one is measured."""
    half = MAX_LINE_BYTES // 2
    start = 0
    while start + half <= len(chunk):
        if b"\n" in chunk[start:start + half]:
            start += half
            continue
        begin = chunk.rfind(b"\n", 0, start) + 1
        end = chunk.find(b"\n", start)
        end = len(chunk) if end < 0 else end
        if end - begin > MAX_LINE_BYTES:
            lineno = lines_before + chunk.count(b"\n", 0, begin) + 1
            raise FltrError(f"{path}, line {lineno}: longer than "
                            f"{MAX_LINE_BYTES >> 20} MiB (not a LETOR line)")
        start = end + 1


class _NotDense(Exception):
    """The dense reader cannot read this file; another path decides."""


def read_letor(path: str | os.PathLike) -> Dataset:
    """Read one LETOR / SVMlight file (plain or gzip) into a :class:`Dataset`.

    Rows of one query are made contiguous (kept in order of first appearance); features are
    float32, labels int8, ``n_levels`` is the largest label plus one. Document ids come from
    ``#docid = ...`` comments when every line has one, else ``doc_ids`` is None.

    Raises
    ------
    FltrError
        Naming the file (and the line, when one line is at fault): missing file, no data
        lines, a line without ``qid:``, a bad token, a line whose feature count differs from
        the file's, a NaN or infinite value, a label that is not a non-negative integer.
    """
    path = Path(path)
    if not path.is_file():
        raise FltrError(f"{path}: no such file")
    try:
        return _read(path)
    except (EOFError, zlib.error, OSError) as exc:  # truncated or corrupt gzip, unreadable file
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise FltrError(f"{path}: cannot read, corrupt or truncated file ({reason})") from None


def _read(path: Path) -> Dataset:
    try:
        features, labels, qids, doc_ids = _read_dense(path)
        expected = features.shape[1]
    except _NotDense:
        features, labels, qids = _read_sparse(path)
        doc_ids, expected = None, features.shape[1]
    if len(labels) == 0:
        raise FltrError(f"{path}: no data lines")
    bad_label = (labels < 0) | (labels > _MAX_LABEL) | (labels != np.floor(labels))
    if bad_label.any() or not np.isfinite(features).all():
        _locate_error(path, expected)
    return _group(path, features, labels.astype(np.int8), qids, doc_ids)


def _read_dense(path: Path):
    # start-up: the engine loads without pandas (0.15 s CPU a process)
    import pandas as pd

    feats, labs, qids, ids = [], [], [], []
    width = None
    want_ids = None  # decided on the first line: ids are read only when it has one
    for block in _blocks(path):
        if want_ids is None:
            want_ids = b"docid" in block[: block.find(b"\n")]
        text = block.replace(b"qid:", b"").translate(_TO_SPACE)
        try:
            table = pd.read_csv(
                io.BytesIO(text), sep=" ", header=None, comment="#", dtype=np.float64,
                engine="c", skip_blank_lines=True,
            ).to_numpy()
        except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
            raise _NotDense from None
        if table.shape[0] == 0:
            continue
        if table.shape[1] % 2 and np.isnan(table[:, -1]).all():
            table = table[:, :-1]  # the space before a '#' comment ends every line
        if width is None:
            width = table.shape[1]
            if width < 4 or width % 2:
                raise _NotDense
            index = np.arange(1, (width - 2) // 2 + 1, dtype=np.float64)
        if table.shape[1] != width or not np.array_equal(
            table[:, 2::2], np.broadcast_to(index, (table.shape[0], len(index)))
        ):
            raise _NotDense
        if np.isnan(table).any():
            raise _NotDense
        if not _colons_match(block, table.shape[0] * (len(index) + 1)):
            raise _NotDense  # a token without a colon reads like two columns
        if (table[:, 1] < 0).any() or (table[:, 1] >= _EXACT_QID).any():
            raise _NotDense  # negative, or too large to be exact in float64
        labs.append(table[:, 0])
        qids.append(table[:, 1])
        feats.append(table[:, 3::2].astype(np.float32))
        if want_ids:
            found = _DOCID.findall(block)
            if len(found) == table.shape[0]:
                ids.extend(f.decode("utf-8", "replace") for f in found)
            else:
                want_ids = False
                ids = []
    if not feats:
        return np.zeros((0, 0), np.float32), np.zeros(0), np.zeros(0, np.int64), None
    labels = np.concatenate(labs)
    qid = np.concatenate(qids)
    if not np.array_equal(qid, np.floor(qid)):
        raise _NotDense
    doc_ids = np.array(ids) if want_ids and len(ids) == len(labels) else None
    return np.concatenate(feats), labels, qid.astype(np.int64), doc_ids


def _colons_match(block: bytes, expected: int) -> bool:
    """Whether the block has one colon per ``qid:`` and feature token (comments aside)."""
    found = block.count(b":")
    if found > expected and b"#" in block:
        found = re.sub(rb"#[^\n]*", b"", block).count(b":")
    return found == expected


def _read_sparse(path: Path):
    """A file that is not dense, through scikit-learn; the width is checked on the sparse
    matrix before it is made dense."""
    # start-up: sklearn.datasets costs 0.8 s CPU; only sparse files need it
    from sklearn.datasets import load_svmlight_file

    for _ in _blocks(path):  # the line-length and decompression caps, before scikit-learn reads lines whole
        pass
    try:
        with _open(path) as fh:
            X, y, q = load_svmlight_file(fh, query_id=True, dtype=np.float32, zero_based=False)
    except (ValueError, TypeError, IndexError, OverflowError):
        _locate_error(path)
    if len(q) != X.shape[0] or (np.asarray(q) < 0).any():
        _locate_error(path)
    nnz = np.diff(X.indptr)
    values, freq = np.unique(nnz, return_counts=True)
    if len(freq) > 1 and freq.max() > 0.5 * len(nnz):
        # most lines have one feature count: a dense file with lines that do not
        _locate_error(path, expected=int(values[np.argmax(freq)]))
    width = _majority_width(X)
    if X.shape[1] > width or width > MAX_FEATURES:
        _locate_error(path, width=width)
    if not np.isfinite(X.data).all():
        _locate_error(path)
    dense = np.zeros((X.shape[0], width), dtype=np.float32)
    rows = np.repeat(np.arange(X.shape[0]), nnz)
    dense[rows, X.indices] = X.data
    return dense, y, np.asarray(q, dtype=np.int64)


def _majority_width(X) -> int:
    """The most common largest feature id of a line (lines without features aside)."""
    nnz = np.diff(X.indptr)
    ends = X.indptr[1:][nnz > 0] - 1
    if len(ends) == 0:
        return 0
    last = X.indices[ends].astype(np.int64) + 1  # sklearn keeps each line's ids sorted
    values, freq = np.unique(last, return_counts=True)
    return int(values[np.argmax(freq)])


def _locate_error(path: Path, expected: int | None = None, width: int | None = None) -> NoReturn:
    """Walk the file line by line and raise for the first bad line (the slow path).

    ``expected`` is the feature count every line must have (dense files), or None;
    ``width`` the largest feature id allowed (sparse files), or None.
    """
    lineno = data_lines = 0
    with _open(path) as fh:
        for lineno, raw in enumerate(io.TextIOWrapper(fh, "utf-8", errors="replace"), start=1):
            body = raw.split("#", 1)[0].split()
            if not body:
                continue
            where = f"{path}, line {lineno}"
            data_lines += 1
            try:
                label = float(body[0])
            except ValueError:
                raise FltrError(f"{where}: label {body[0]!r} is not a number") from None
            if not (math.isfinite(label) and 0 <= label <= _MAX_LABEL and label == math.floor(label)):
                raise FltrError(f"{where}: label {body[0]!r} is not an integer 0..{_MAX_LABEL}")
            if len(body) < 2 or not body[1].startswith("qid:"):
                raise FltrError(f"{where}: missing 'qid:' after the label")
            try:
                qid = int(body[1][4:])
            except ValueError:
                raise FltrError(f"{where}: bad query id {body[1]!r}") from None
            if not 0 <= qid <= _MAX_QID:
                raise FltrError(f"{where}: query id {body[1][4:]} outside 0..2^63-1")
            previous = 0
            for token in body[2:]:
                index, sep, value = token.partition(":")
                if not sep:
                    raise FltrError(f"{where}: feature token {token!r} has no colon (expected id:value)")
                try:
                    idx, val = int(index), float(value)
                except ValueError:
                    raise FltrError(f"{where}: bad feature token {token!r}") from None
                if idx < 1:
                    raise FltrError(f"{where}: feature id {idx} in {token!r}, ids start at 1")
                if idx > MAX_FEATURES:
                    raise FltrError(f"{where}: feature id {index} beyond the largest allowed ({MAX_FEATURES})")
                if width is not None and idx > min(width, MAX_FEATURES):
                    raise FltrError(f"{where}: feature id {idx} beyond the file's width {min(width, MAX_FEATURES)} "
                                    f"(most lines end at feature {width}; at most {MAX_FEATURES} features)")
                if idx <= previous:
                    raise FltrError(f"{where}: feature indices must be increasing ({token!r})")
                if not math.isfinite(val):
                    raise FltrError(f"{where}: feature {idx} is {value} (NaN or infinite)")
                previous = idx
            count = len(body) - 2
            if expected is not None and count != expected:
                raise FltrError(f"{where}: {count} features, expected {expected}")
    if data_lines == 0:
        raise FltrError(f"{path}: no data lines")
    raise FltrError(f"{path}: not a LETOR / SVMlight file (checked {lineno} lines)")


def _group(path: Path, features, labels, qids, doc_ids) -> Dataset:
    """Make each query's rows contiguous (order of first appearance) and build offsets."""
    starts = np.flatnonzero(np.r_[True, qids[1:] != qids[:-1]])
    if len(np.unique(qids)) != len(starts):
        _, first, inverse = np.unique(qids, return_index=True, return_inverse=True)
        rank = np.empty_like(first)
        rank[np.argsort(first)] = np.arange(len(first))
        order = np.argsort(rank[inverse], kind="stable")
        features, labels, qids = features[order], labels[order], qids[order]
        doc_ids = None if doc_ids is None else doc_ids[order]
        starts = np.flatnonzero(np.r_[True, qids[1:] != qids[:-1]])
    ptr = np.r_[starts, len(qids)].astype(np.int64)
    return Dataset(
        features=np.ascontiguousarray(features, dtype=np.float32),
        labels=labels,
        query_ptr=ptr,
        qids=qids[starts].astype(np.int64),
        n_levels=int(labels.max()) + 1,
        name=str(path),
        doc_ids=doc_ids,
    )
