"""Atomic file output for every command: a file is either complete or absent.

``write_file`` writes through a fresh temporary name created exclusively (``mkstemp``,
``O_EXCL``) in the target folder and renames it onto the target, so no half-written file
and no fixed temporary name is ever left behind; ``write_files`` writes a set of files
(relative path -> bytes or text) into a folder that way.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping


def write_file(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, then rename)."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def write_files(folder: str | Path, files: Mapping[str, bytes | str]) -> None:
    """Write every ``relative path -> content`` of ``files`` under ``folder`` (created)."""
    folder = Path(folder)
    for name, data in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        write_file(target, data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
