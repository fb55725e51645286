"""Progress of long work on stderr: a rich bar on a terminal; off a terminal (nohup, CI logs, a
notebook's subprocess) plain lines with the elapsed time and an estimate of what remains -- one per
step, or one per tenth of the work for many small steps (training rounds); nothing with ``--quiet``."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Iterator

from fltr_audit.runs.progress import NO_PROGRESS, Progress

def duration(seconds: float) -> str:
    """``seconds`` as ``12 s``, ``3 min 5 s`` or ``2 h 4 min``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


class PlainLines:
    """One line per step (``per_tenth`` False) or per tenth of ``total`` on ``stream``:
    ``DESCRIPTION: 3/12 done, 41 s elapsed, about 2 min 4 s left``."""

    def __init__(self, total: int, description: str, per_tenth: bool = False, stream=None):
        self.total, self.description, self.per_tenth = total, description, per_tenth
        self.stream = stream or sys.stderr
        self.done, self.start, self.tenths = 0, time.monotonic(), 0

    def advance(self, n: int = 1, description: str | None = None) -> None:
        self.done += n
        tenths = 10 * self.done // self.total
        if self.per_tenth and tenths == self.tenths and self.done < self.total:
            return
        self.tenths = tenths
        elapsed = time.monotonic() - self.start
        left = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        label = (description or self.description).split(" offline")[0]
        print(f"{label}: {self.done}/{self.total} done, {duration(elapsed)} elapsed"
              + (f", about {duration(left)} left" if self.done < self.total else ""), file=self.stream, flush=True)


@contextmanager
def progress(total: int, description: str, quiet: bool, per_tenth: bool = False) -> Iterator[Progress]:
    """The progress of ``total`` steps (module docstring); ``advance`` moves it."""
    if quiet or total <= 0:
        yield NO_PROGRESS
        return
    if not sys.stderr.isatty():
        yield PlainLines(total, description, per_tenth)
        return
    # start-up: rich loads only when a bar is shown (not for a group's --help)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

    bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
              console=Console(stderr=True), transient=True)
    task = bar.add_task(description, total=total)

    class _Bar:
        def advance(self, n: int = 1, description: str | None = None) -> None:
            bar.update(task, advance=n, **({"description": description} if description else {}))

    with bar:
        yield _Bar()
