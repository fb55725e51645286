"""What long work reports its progress to (``Progress``): the command line passes a bar or plain
lines (``fltr_audit.cli.progress``); the Python API passes nothing (``NO_PROGRESS``)."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """``advance(n=1, description=None)`` after each step of the work."""

    def advance(self, n: int = 1, description: str | None = None) -> None: ...


class _Silent:
    def advance(self, n: int = 1, description: str | None = None) -> None:
        pass


NO_PROGRESS: Progress = _Silent()
