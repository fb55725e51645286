"""A training run's output folder (``train ... --out DIR``): ``curves.csv``, ``model.npy`` and
``config.json`` (and a recording), written into a temporary folder beside it that is renamed onto
it when everything is written, so that the folder is either complete or absent."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from fltr_audit.base.atomic import CannotWrite, temporary_dir, write_file, write_with
from fltr_audit.errors import FltrError


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy arrays and scalars as lists and Python numbers, NaN as None and an
    infinite value as the string "inf" or "-inf" (the JSON the project writes)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, float) and not np.isfinite(obj):
        return None if np.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def check_out_dir(out: Path) -> None:
    """``--out`` must be absent or an empty folder."""
    try:
        taken = out.exists() and (not out.is_dir() or any(out.iterdir()))
    except OSError as exc:
        raise FltrError(f"--out: {out}: cannot read ({exc.strerror or exc})") from None
    if taken:
        raise FltrError(f"--out: {out} exists and is not an empty folder")


@contextmanager
def atomic_out_dir(out: Path) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``out`` (:func:`fltr_audit.base.atomic.temporary_dir`);
    when the block succeeds it is renamed onto ``out`` (with the permissions of a folder made
    under the umask), otherwise removed, so that ``out`` is either complete or absent."""
    out = Path(out)
    check_out_dir(out)
    with temporary_dir(out, option="--out") as tmp:
        try:
            yield tmp
        except OSError as exc:  # a full disk while writing: name the output, not the temporary folder
            raise FltrError(f"--out: {out}: cannot write ({exc.strerror or exc})") from None
        except CannotWrite as exc:
            if not exc.path.is_relative_to(tmp):
                raise
            raise FltrError(f"--out: {out / exc.path.relative_to(tmp)}: cannot write ({exc.reason})") from None
        umask = os.umask(0)
        os.umask(umask)
        try:
            tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; the output folder is not
            if out.exists():
                out.rmdir()
            os.replace(tmp, out)
        except OSError as exc:
            raise FltrError(f"--out: {out}: cannot write ({exc.strerror or exc})") from None


@contextmanager
def run_folder(out: Path | None) -> Iterator[Path]:
    """``atomic_out_dir(out)``, or with ``out`` None a temporary folder removed afterwards: a run
    trained for its printed figures alone writes nothing."""
    if out is not None:
        with atomic_out_dir(Path(out)) as tmp:
            yield tmp
        return
    with tempfile.TemporaryDirectory(prefix="fltr-audit-run-") as tmp:
        yield Path(tmp)


def write_run(folder: Path, curves: Any, params: np.ndarray, config: dict) -> None:
    """Write a training run: ``curves.csv`` (a DataFrame), ``model.npy`` and ``config.json``."""
    write_file(folder / "curves.csv", curves.to_csv(index=False))
    write_with(folder / "model.npy", lambda fh: np.save(fh, params))
    write_file(folder / "config.json", json.dumps(jsonable(config), indent=2) + "\n")
