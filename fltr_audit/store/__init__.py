"""Storage: the SQLite results store (``results``: ``ResultsStore`` and ``load``; its file,
``sqlite_file``, and rows, ``table_rows``), its typed records (``records``) and the recording format
of intercepted messages (``recording``).

``from fltr_audit.store import load, ResultsStore`` keeps working (the results store's names), and
imports the results store (and pandas) only then: a Flower node reads and writes recordings only."""

from __future__ import annotations

from typing import Any

__all__ = ["ResultsStore", "load"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from fltr_audit.store import results  # start-up: pandas only for the results store

        return getattr(results, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
