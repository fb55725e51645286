"""Ctrl-C and SIGTERM during a campaign: the first Ctrl-C is acknowledged at once and lets the
runs in flight finish (and be stored) while nothing new starts; a second Ctrl-C abandons them;
SIGTERM abandons them at once and the command exits 143 (128 + SIGTERM)."""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator


_raised: list[KeyboardInterrupt] = []


class _Remembered(KeyboardInterrupt):
    """An interruption the CLI can still tell apart after typer has turned every
    KeyboardInterrupt into exit code 130 (see :func:`last_raised`)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        _raised.append(self)


class Terminated(_Remembered):
    """SIGTERM arrived: stop now (the CLI exits 143)."""


class Interrupted(_Remembered):
    """A campaign stopped after the first Ctrl-C, its runs in flight finished and stored; the
    message says what was kept (the CLI exits 130)."""


def last_raised() -> KeyboardInterrupt | None:
    """The last Terminated or Interrupted raised since the previous call (then forgotten)."""
    last = _raised[-1] if _raised else None
    _raised.clear()
    return last


class GracefulStop:
    """Whether a stop was requested (first Ctrl-C), and how many runs are in flight now (kept
    up to date by the executor, for the acknowledgement). Until an executor that can finish its
    runs in flight says so (``graceful``), Ctrl-C interrupts at once, as by default."""

    def __init__(self) -> None:
        self.requested = False
        self.in_flight = 0
        self.graceful = False  # set by an executor that honours a stop (local ones; not Dask)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.requested or not self.graceful:
            raise_interrupted(signum, frame)
            return
        self.requested = True
        n = self.in_flight
        # os.write, not print: a handler may run while the main thread is inside a print
        os.write(2, (f"stopping: finishing {n} run{'s' * (n != 1)} in flight; Ctrl-C again to abandon "
                     f"{'them' if n != 1 else 'it'}\n").encode())


@contextmanager
def graceful_stop() -> Iterator[GracefulStop]:
    """Within the block, the first SIGINT sets ``requested`` (and prints the acknowledgement),
    the second raises KeyboardInterrupt. Outside the main thread nothing is installed."""
    stop = GracefulStop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.signal(signal.SIGINT, stop._on_sigint)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


DEFERRING_MODULES = ("llvmlite", "numba")
"""Packages whose frames a signal handler may run in from a callback of C code -- numba compiling
calls back into llvmlite through ctypes -- where an exception is printed and dropped, not raised."""


def deferred(signum: int, frame: Any) -> bool:
    """Whether the handler of ``signum`` runs in a frame of ``DEFERRING_MODULES``; then the signal is
    sent again a tenth of a second later, to be raised where it propagates (a SIGTERM or Ctrl-C
    during numba's compilation let the run go on to its end)."""
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    if module.split(".")[0] not in DEFERRING_MODULES:
        return False
    again = threading.Timer(0.1, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()
    return True


def raise_terminated(signum: int, frame: Any) -> None:
    """The SIGTERM handler of the CLI (deferred out of C callbacks, ``deferred``)."""
    if not deferred(signum, frame):
        raise Terminated


def raise_interrupted(signum: int, frame: Any) -> None:
    """The SIGINT handler of the CLI: ``signal.default_int_handler``, deferred out of C callbacks."""
    if not deferred(signum, frame):
        raise KeyboardInterrupt
