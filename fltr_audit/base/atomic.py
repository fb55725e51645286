"""Atomic file output for every command: a file is either complete or absent.

Every write goes through a fresh temporary name created exclusively (``mkstemp``:
``O_CREAT | O_EXCL``, so a planted file or symbolic link at that name is never opened or
followed) in the target's own folder, is flushed to disk and renamed onto the target
(``rename`` replaces a link at the target instead of writing through it). On any failure the
temporary file is removed and the error names the path. Temporary names carry the writing
process's id (``.NAME.PID.XXXXXXXX.tmp``); what a killed writer left behind is swept by the
next write of the same name once that process is gone.

``write_file`` writes bytes or text, ``write_with`` lets a writer (``np.save``, ``gzip``, a
CSV writer) fill the open temporary file, ``write_files`` writes a set of files (relative
path -> bytes or text) under one folder; ``temporary_dir`` is the same for a folder.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator, Mapping

from fltr_audit.errors import FltrError

_TEMP = re.compile(r"(\d+)\.[A-Za-z0-9_]{8}\.tmp|tmp-(\d+)-[A-Za-z0-9_]{8}")


def write_file(path: str | Path, data: bytes | str | Iterable[bytes]) -> None:
    """Write ``data`` (bytes, text as UTF-8, or blocks of bytes) to ``path`` atomically."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    blocks = [bytes(data)] if isinstance(data, (bytes, bytearray, memoryview)) else data

    def fill(handle: IO[bytes]) -> None:
        for block in blocks:
            handle.write(block)

    write_with(path, fill)


def write_with(path: str | Path, writer: Callable[[IO[bytes]], None]) -> None:
    """Call ``writer`` on a binary file open at a fresh temporary name beside ``path``, then
    rename it onto ``path``; FltrError naming ``path`` when the folder cannot be written."""
    path = Path(path)
    folder = path.parent
    if path.is_dir() and not path.is_symlink():
        raise FltrError(f"{path}: is a folder, cannot write a file there")
    _sweep(folder, f".{path.name}.")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise _error(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            writer(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise _error(path, exc) from None
    except BaseException:
        _remove(tmp)
        raise


def write_files(folder: str | Path, files: Mapping[str, bytes | str]) -> None:
    """Write every ``relative path -> content`` of ``files`` under ``folder`` (created).

    A relative path may not leave ``folder`` (no absolute paths, no ``..``)."""
    folder = Path(folder)
    for name, data in files.items():
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise FltrError(f"{folder}: refusing to write {name!r} outside the output folder")
        target = folder / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _error(target.parent, exc) from None
        write_file(target, data)


@contextmanager
def temporary_dir(beside: str | Path, option: str = "") -> Iterator[Path]:
    """A fresh private folder ``.NAME.tmp-PID-XXXX`` beside ``beside`` for building an output
    folder; removed when the block fails (the caller renames it when it succeeds). ``option``
    (such as ``--out``) starts the error when the folder cannot be made."""
    beside = Path(beside)
    _sweep(beside.parent, f".{beside.name}.")
    try:
        beside.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{beside.name}.tmp-{os.getpid()}-", dir=beside.parent))
    except OSError as exc:
        error = _error(beside, exc)
        raise FltrError(f"{option}: {error}" if option else str(error)) from None
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class CannotWrite(FltrError):
    """``path`` could not be written for ``reason`` (full disk, permissions, ...)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: cannot write ({reason})")
        self.path, self.reason = path, reason


def _error(path: Path, exc: OSError) -> CannotWrite:
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        reason = "no space left on the device"
    return CannotWrite(path, reason)


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def _sweep(folder: Path, prefix: str) -> None:
    """Remove temporary files or folders ``PREFIX[tmp-]PID...`` of writers that no longer run."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        match = _TEMP.fullmatch(entry.name[len(prefix):])
        if match is None:
            continue
        pid = int(match.group(1) or match.group(2))
        if pid == os.getpid() or _alive(pid):
            continue
        if match.group(2) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        elif match.group(1):
            _remove(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
