"""The processes of one deployment, found by the marker in their environment, and the supervisor
that stops them when the command that started them dies (SIGKILL included).

Every process a deployment starts gets ``FLTR_AUDIT_DEPLOYMENT=<marker>`` in its environment, and
Flower's own children (SuperExecs, ServerApps, ClientApps, each SuperExec in a session of its own)
inherit it, so the whole tree is found in ``/proc`` whatever became of its parent chain. Run as a
script (``python -I reaper.py MARKER``, standard library only) this file is the supervisor: it
waits for end of file on its stdin, a pipe whose only writer is the deployment's command, which
the kernel closes however that command ends, and then stops every marked process by its pid.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

MARKER = "FLTR_AUDIT_DEPLOYMENT"
"""The environment variable naming the deployment a process belongs to."""


def marked(marker: str) -> list[int]:
    """The live processes (zombies left out) whose environment holds ``MARKER=marker``, this one
    excepted."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0") and not _zombie(entry):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or another user's
            continue
    return found


def _zombie(entry: Path) -> bool:
    return (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def signal_all(pids: list[int], sig: int) -> None:
    """Send ``sig`` to each of ``pids`` that still exists."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def terminate(marker: str, grace: float) -> list[int]:
    """SIGTERM every process marked ``marker``, by pid; SIGKILL what is left (or was started
    meanwhile) after ``grace`` seconds, until none is left or ``grace`` more seconds have passed;
    the pids still alive then (none, unless a process cannot die)."""
    signal_all(marked(marker), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    deadline = time.monotonic() + grace
    while (left := marked(marker)) and time.monotonic() < deadline:
        signal_all(left, signal.SIGKILL)
        time.sleep(0.1)
    return left


def supervise(marker: str, grace: float) -> None:
    """Wait for end of file on stdin, then stop the deployment ``marker``."""
    while os.read(sys.stdin.fileno(), 1024):
        pass
    terminate(marker, grace)


if __name__ == "__main__":
    supervise(sys.argv[1], float(sys.argv[2]))
