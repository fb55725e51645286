"""Starting and stopping a deployment's processes: Flower's programs found next to the running
interpreter (no activated environment needed), each started with that folder first on its PATH
(the SuperLink and SuperNodes start ``flower-superexec`` by name) and the deployment's marker in
its environment, in a session of its own, its output in a log; all of them, and everything they
start, stopped by their own pids, also when this process dies (the supervisor of ``reaper``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fltr_audit.errors import FltrError
from fltr_audit.flower import reaper

STOP_SECONDS = 15.0
"""Grace after SIGTERM before SIGKILL."""


def bin_folder() -> Path:
    """The folder of the running interpreter, where pip put Flower's programs beside it."""
    return Path(sys.executable).parent


def tool(name: str) -> str:
    """The path of Flower's program ``name``: beside the interpreter, else on the PATH."""
    path = bin_folder() / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        raise FltrError(f"{name}: not found beside {sys.executable} nor on the PATH; install the Flower extra: "
                        "pip install 'fltr-audit[flower]'")
    return found


@contextmanager
def logs_kept_on_failure(work: Path) -> Iterator[Path]:
    """A folder for the logs outside ``work`` (which the CLI removes with its output when the run
    fails): moved into ``work`` when the block succeeds, kept where it is otherwise, so that the
    block's errors can name a log the user still has."""
    logs = Path(tempfile.mkdtemp(prefix="fltr-audit-flower-logs-"))
    yield logs
    work.mkdir(parents=True, exist_ok=True)
    for log in sorted(logs.iterdir()):
        shutil.move(log, work / log.name)
    logs.rmdir()


class Processes:
    """The processes of one deployment, with ``env`` added to this process's environment; a
    context manager that stops them all on exit."""

    def __init__(self, env: dict[str, str]):
        self.marker = uuid.uuid4().hex
        path = os.pathsep.join([str(bin_folder()), os.environ.get("PATH", os.defpath)])
        self.env = {**os.environ, **env, "PATH": path, reaper.MARKER: self.marker}
        self.started: list[tuple[str, subprocess.Popen, Path]] = []
        self._supervisor = subprocess.Popen([sys.executable, "-I", reaper.__file__, self.marker, str(STOP_SECONDS)],
                                            stdin=subprocess.PIPE, start_new_session=True)

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _popen(self, name: str, args: list[str], log: Path) -> subprocess.Popen:
        with open(log, "w") as fh:
            return subprocess.Popen([tool(name), *args], stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self.env, start_new_session=True)

    def start(self, name: str, args: list[str], log: Path) -> subprocess.Popen:
        """Start Flower's server program ``name`` with ``args``, its output into ``log``."""
        process = self._popen(name, args, log)
        self.started.append((name, process, log))
        return process

    def run(self, name: str, args: list[str], log: Path, timeout: float) -> int:
        """Run ``name`` to its end, its output into ``log``; its exit code. Not ended after
        ``timeout`` seconds: killed, and FltrError naming the log."""
        process = self._popen(name, args, log)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise FltrError(f"Flower deployment: {name} did not finish in time (log: {log})") from None

    def check_running(self) -> None:
        """FltrError naming the first server program that has exited, its exit code and its log."""
        for name, process, log in self.started:
            if process.poll() is not None:
                raise FltrError(f"Flower deployment: {name} exited with code {process.returncode} (log: {log})")

    def stop(self) -> None:
        """Stop every process of the deployment (the marked ones, Flower's own included) by its pid,
        then the supervisor."""
        left = reaper.terminate(self.marker, STOP_SECONDS)
        self._supervisor.stdin.close()
        self._supervisor.wait()
        for _, process, _ in self.started:
            if process.pid not in left:
                process.wait()
        if left:
            raise FltrError(f"Flower deployment: processes {left} did not stop")
