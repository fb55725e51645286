"""Executors of campaign runs: in this process, in a local process pool (spawned workers that
end with their parent) or on a Dask cluster; each run computed with single-threaded BLAS and
stored with the environment that computed it.

Part of the composition root: a run is ``fltr_audit.runs.audit.run_audit``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Callable, Iterable

from fltr_audit.spec.grid import Run
from fltr_audit.constraints import POSITIVE_INT, ParameterError, check
from fltr_audit.errors import FltrError
from fltr_audit.spec.run import RunSpec
from fltr_audit.runs.interrupts import GracefulStop


def environment() -> dict:
    """Package versions and interpreter of this process, stored with every run."""
    import platform

    import numpy
    import pandas
    import scipy
    import sklearn
    import statsmodels

    from fltr_audit._version import __version__

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


def execute_run(spec: RunSpec) -> dict:
    """Compute one run in this process: its tables, timing and environment (picklable).

    The run computes with single-threaded BLAS: a multi-threaded BLAS sums in an order that
    depends on its thread count (which Dask pins to 1 and a process pool does not), so the
    same seed would give different last bits, and attacks that threshold or rank (OLSR on a
    secure aggregate) different rows."""
    import pandas as pd
    from threadpoolctl import threadpool_limits

    from fltr_audit.runs.audit import run_audit, splits_of
    from fltr_audit.runs.whole_run import whole_run_audit

    start = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        tables = run_audit(spec)
        if spec.audit.run_canaries is not None:  # the campaign's [audit_run] section
            tables["run_audits"] = pd.DataFrame([whole_run_audit(spec, splits_of(spec)).as_dict()])
    return {"tables": tables, "seconds": time.perf_counter() - start, "env": environment()}


def _exit_with_parent(parent: int) -> None:
    """Initializer of a pool worker: a daemon thread ends the worker as soon as its parent
    (the campaign process) is gone, even after SIGKILL, so no worker outlives the campaign
    (and the multiprocessing resource tracker, which waits for them, exits too)."""
    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.5)

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (finish or abandon)
    threading.Thread(target=watch, name="fltr-audit parent watchdog", daemon=True).start()


def execute_runs(runs: list[Run], run_fn: Callable[[RunSpec], dict], workers: int | None,
                 scheduler: str | None, stop: GracefulStop | None = None
                 ) -> Iterable[tuple[Run, dict | None, str | None]]:
    """Compute ``runs`` with ``run_fn`` (in this process, a spawned process pool of ``workers``, or
    on the Dask cluster at ``scheduler``), yielding ``(run, result, None)`` or ``(run, None, error)``
    as each finishes.

    Locally, once ``stop.requested`` (the first Ctrl-C) no new run starts and the runs in flight
    finish; any exception here (a second Ctrl-C, SIGTERM) ends the pool's workers at once."""
    if not runs:
        return
    if scheduler is not None:
        yield from _execute_dask(runs, run_fn, scheduler)
        return
    workers = workers or os.cpu_count() or 1
    check("workers", workers, POSITIVE_INT)
    stop = stop or GracefulStop()
    stop.graceful = True
    try:
        if workers > 1:
            yield from _execute_pool(runs, run_fn, min(workers, len(runs)), stop)
            return
        for run in runs:
            if stop.requested:
                return
            stop.in_flight = 1
            try:
                result = run, run_fn(run.spec), None
            except Exception as exc:  # a failed run is recorded; the others go on
                result = run, None, _describe(exc)
            stop.in_flight = 0
            yield result
    finally:
        stop.graceful = False


def _execute_pool(runs: list[Run], run_fn: Callable[[RunSpec], dict], workers: int, stop: GracefulStop
                  ) -> Iterable[tuple[Run, dict | None, str | None]]:
    """At most ``workers`` runs submitted at a time (so every submitted run is in flight, and a
    stop starts nothing new), polled so that a requested stop is seen within a quarter second."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_exit_with_parent, initargs=(os.getpid(),))
    queue = iter(runs)
    running: dict[Any, Run] = {}

    def submit_next() -> None:
        run = next(queue, None)
        if run is not None and not stop.requested:
            running[pool.submit(run_fn, run.spec)] = run

    try:
        for _ in range(workers):
            submit_next()
        while running:
            stop.in_flight = len(running)
            done, _ = wait(list(running), timeout=0.25, return_when=FIRST_COMPLETED)
            for future in done:
                run = running.pop(future)
                try:
                    outcome = run, future.result(), None
                except BrokenProcessPool:
                    raise FltrError("a worker process died; finished runs are stored, re-run the campaign "
                                    "to complete it") from None
                except Exception as exc:
                    outcome = run, None, _describe(exc)
                submit_next()
                yield outcome
        pool.shutdown(wait=True)
    except BaseException:  # abandoned (a second Ctrl-C, SIGTERM, an error): end the workers now
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise


def check_scheduler(address: str) -> None:
    """ParameterError naming ``scheduler`` unless a Dask scheduler answers at ``address``."""
    _connect_dask(address).close()


def _connect_dask(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise ParameterError("scheduler", "needs dask.distributed: pip install 'fltr-audit[dask]'") from None
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise ParameterError("scheduler", f"cannot reach {address}: {' '.join(str(exc).split()) or type(exc).__name__}") from None


def _execute_dask(runs: list[Run], run_fn: Callable[[RunSpec], dict], scheduler: str
                  ) -> Iterable[tuple[Run, dict | None, str | None]]:
    client = _connect_dask(scheduler)
    from distributed import as_completed

    try:
        futures = {client.submit(run_fn, run.spec, key=f"run-{run.key}", pure=False): run for run in runs}
        for future in as_completed(futures):
            run = futures[future]
            try:
                yield run, future.result(), None
            except Exception as exc:
                yield run, None, _describe(exc)
    finally:
        client.close()


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
