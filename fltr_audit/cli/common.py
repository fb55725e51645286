"""Shared CLI plumbing: --json output, progress bars, one-line errors."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from fltr_audit.errors import FltrError


def _to_jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return _to_jsonable(obj.item())
    if isinstance(obj, float) and not np.isfinite(obj):
        return None if np.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def emit_json(obj: Any) -> None:
    """Print ``obj`` as JSON on stdout (numpy types converted, NaN as null)."""
    sys.stdout.write(json.dumps(_to_jsonable(obj), indent=2) + "\n")


def parse_list(value: str, option: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    """Split a comma-separated option value, checking each item against ``allowed``."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise FltrError(f"{option}: empty list")
    if allowed is not None:
        for item in items:
            if item not in allowed:
                raise FltrError(f"{option}: unknown value {item!r} (choose from {', '.join(allowed)})")
    return items


@contextmanager
def progress(total: int, description: str, quiet: bool) -> Iterator[Any]:
    """A rich progress bar on stderr; ``advance(n=1, **fields)`` moves it. Silent when quiet."""
    if quiet or total <= 0:
        class _Silent:
            def advance(self, n: int = 1, description: str | None = None) -> None:
                pass

        yield _Silent()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task(description, total=total)

    class _Bar:
        def advance(self, n: int = 1, description: str | None = None) -> None:
            bar.update(task, advance=n, **({"description": description} if description else {}))

    with bar:
        yield _Bar()


def fail(message: str) -> None:
    """Raise the one-line CLI error (exit code 2)."""
    raise FltrError(message)
