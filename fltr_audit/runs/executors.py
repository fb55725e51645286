"""Where every fan-out runs: one ``Executor`` choice -- serial in this process, a local pool of
worker processes (forked from a server that imported the run code once, ending with their parent),
or a Dask cluster -- for campaign runs,
multi-run audits and any other embarrassingly parallel work. A task is computed with
single-threaded BLAS wherever it runs (a multi-threaded BLAS sums in an order that depends on its
thread count), so every executor gives bit-identical results.

A campaign's task is ``runs.campaign.execute_run``.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import signal
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from threadpoolctl import threadpool_limits

from fltr_audit._version import __version__
from fltr_audit.constraints import POSITIVE_INT, ParameterError, check
from fltr_audit.errors import FltrError
from fltr_audit.runs.interrupts import GracefulStop
from fltr_audit.runs.progress import NO_PROGRESS, Progress


@dataclass(frozen=True)
class Task:
    """One unit of a fan-out: a key that names it (a run key) and the argument of the task's function."""

    key: str
    argument: Any


Outcome = tuple[Task, Any, "BaseException | None"]
"""``(task, result, None)`` or ``(task, None, the exception it raised)`` (``describe`` says it in one line)."""


@dataclass(frozen=True)
class Executor:
    """The executor choice: ``scheduler`` (a Dask scheduler address), else a local pool of
    ``workers`` processes (None: one per core; 1: serial in this process)."""

    workers: int | None = 1
    scheduler: str | None = None

    def __post_init__(self) -> None:
        if self.workers is not None:
            check("workers", self.workers, POSITIVE_INT)

    def map(self, fn: Callable[[Any], Any], tasks: list[Task], stop: GracefulStop | None = None) -> Iterator[Outcome]:
        """``fn(task.argument)`` for every task, yielded as each finishes (any order). A failed task
        is an outcome with its error; the others go on. Locally, once ``stop.requested`` (the first
        Ctrl-C) no new task starts and those in flight finish; any exception here (a second
        Ctrl-C, SIGTERM) ends the pool's workers at once."""
        if not tasks:
            return
        if self.scheduler is not None:
            yield from _execute_dask(tasks, fn, self.scheduler)
            return
        workers = self.workers or os.cpu_count() or 1
        stop = stop or GracefulStop()
        stop.graceful = True
        try:
            if workers > 1 and len(tasks) > 1:
                yield from _execute_pool(tasks, fn, min(workers, len(tasks)), stop)
            else:
                yield from _execute_here(tasks, fn, stop)
        finally:
            stop.graceful = False

    def results(self, fn: Callable[[Any], Any], tasks: list[Task], progress: Progress = NO_PROGRESS) -> list[Any]:
        """``fn(task.argument)`` of every task, in the tasks' order, ``progress`` advanced as each
        succeeds; FltrError naming the first failure (after no progress line of its own)."""
        done = {}
        for task, result, error in self.map(fn, tasks):
            done[task.key] = (result, error)
            if error is None:
                progress.advance()
        for task in tasks:
            result, error = done[task.key]
            if isinstance(error, FltrError):  # bad input found inside the task: said as it was said there
                raise error
            if error is not None:
                raise FltrError(f"task {task.key} failed: {describe(error)}")
        return [done[task.key][0] for task in tasks]


SERIAL = Executor(workers=1)


def single_threaded(fn: Callable[[Any], Any], argument: Any) -> Any:
    """``fn(argument)`` with single-threaded BLAS (the same bits on every executor)."""

    with threadpool_limits(limits=1, user_api="blas"):
        return fn(argument)


def environment() -> dict:
    """Package versions and interpreter of this process, stored with every run."""
    # start-up: only a campaign's record reads these versions (statsmodels alone 0.9 s CPU)
    import numpy
    import pandas
    import scipy
    import sklearn
    import statsmodels

    return {
        "fltr_audit": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "statsmodels": statsmodels.__version__,
        "pandas": pandas.__version__,
        "machine": platform.machine(),
        "cores": os.cpu_count(),
    }


def _execute_here(tasks: list[Task], fn: Callable[[Any], Any], stop: GracefulStop) -> Iterator[Outcome]:
    for task in tasks:
        if stop.requested:
            return
        stop.in_flight = 1
        try:
            outcome = task, single_threaded(fn, task.argument), None
        except Exception as exc:  # a failed task is an outcome; the others go on
            outcome = task, None, exc
        stop.in_flight = 0
        yield outcome


def _pool_context() -> multiprocessing.context.BaseContext:
    """How the local pool starts its workers: forked from a fork server that imported the run code
    once (``runs.pool_preload``; the server starts with the process's first pool and serves every
    later one, with the code as imported then), or spawned, each a fresh interpreter, where the
    platform has no fork server."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["fltr_audit.runs.pool_preload"])
    return context


def _start_worker(environment: dict[str, str]) -> None:
    """Initializer of a pool worker: the environment the caller has now (a forked worker inherits
    the fork server's, from when it started), Ctrl-C left to the caller, and a daemon thread that
    ends the worker as soon as its parent is gone, even after SIGKILL, so no worker outlives the
    caller (the parent is the fork server, which exits when the caller does, or the caller itself;
    the multiprocessing resource tracker, which waits for the workers, exits too)."""
    os.environ.clear()
    os.environ.update(environment)
    parent = os.getppid()

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.5)

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle (finish or abandon)
    threading.Thread(target=watch, name="fltr-audit parent watchdog", daemon=True).start()


def _execute_pool(tasks: list[Task], fn: Callable[[Any], Any], workers: int, stop: GracefulStop
                  ) -> Iterator[Outcome]:
    """At most ``workers`` tasks submitted at a time (so every submitted task is in flight, and a
    stop starts nothing new), polled so that a requested stop is seen within a quarter second."""

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context(),
                               initializer=_start_worker, initargs=(dict(os.environ),))
    queue = iter(tasks)
    running: dict[Any, Task] = {}

    def submit_next() -> None:
        task = next(queue, None)
        if task is not None and not stop.requested:
            running[pool.submit(single_threaded, fn, task.argument)] = task

    try:
        for _ in range(workers):
            submit_next()
        while running:
            stop.in_flight = len(running)
            done, _ = wait(list(running), timeout=0.25, return_when=FIRST_COMPLETED)
            for future in done:
                task = running.pop(future)
                try:
                    outcome = task, future.result(), None
                except BrokenProcessPool:
                    raise FltrError("a worker process died; finished runs are stored, run again to "
                                    "complete the rest") from None
                except Exception as exc:
                    outcome = task, None, exc
                submit_next()
                yield outcome
        pool.shutdown(wait=True)
    except BaseException:  # abandoned (a second Ctrl-C, SIGTERM, an error): end the workers now
        for process in list((pool._processes or {}).values()):
            process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)  # the workers are gone: returns at once
        del pool  # its queues' semaphores are released here, not left to the resource tracker at exit
        raise


def check_scheduler(address: str) -> None:
    """ParameterError naming ``scheduler`` unless a Dask scheduler answers at ``address``."""
    _connect_dask(address).close()


def _connect_dask(address: str) -> Any:
    try:
        # optional extra: dask (fltr-audit[dask])
        from distributed import Client
    except ImportError:
        raise ParameterError("scheduler", "needs dask.distributed: pip install 'fltr-audit[dask]'") from None
    try:
        reason = _unreachable(address)
        if reason is None:
            return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
    raise ParameterError("scheduler", f"cannot reach {address}: {reason}")


def _unreachable(address: str) -> str | None:
    """Why a tcp or tls ``address`` cannot answer, known at once (a host that does not resolve, a
    port nobody listens on), else None: Dask's Client retries such an address to its timeout."""
    # optional extra: dask (fltr-audit[dask]), imported by the caller
    from distributed.comm import parse_address, parse_host_port

    scheme, location = parse_address(address)
    if scheme not in ("tcp", "tls"):
        return None
    host, port = parse_host_port(location, default_port=8786)
    try:
        socket.create_connection((host, port), timeout=5).close()
    except socket.gaierror as exc:
        return f"the host {host} does not resolve ({exc.strerror})"
    except ConnectionRefusedError:
        return f"nothing listens on port {port} of {host}"
    except OSError:
        return None  # a slow or filtered network: Dask's own timeout decides
    return None


def _execute_dask(tasks: list[Task], fn: Callable[[Any], Any], scheduler: str) -> Iterable[Outcome]:
    client = _connect_dask(scheduler)
    # optional extra: dask (fltr-audit[dask])
    from distributed import as_completed

    try:
        futures = {client.submit(single_threaded, fn, task.argument, key=f"task-{task.key}", pure=False): task
                   for task in tasks}
        for future in as_completed(futures):
            task = futures[future]
            try:
                yield task, future.result(), None
            except Exception as exc:
                yield task, None, exc
    finally:
        client.close()


def describe(exc: BaseException) -> str:
    """An exception as one line: its class and message."""
    return f"{type(exc).__name__}: {exc}"
