"""Executors of campaign runs: in this process, in a local process pool (spawned workers that
end with their parent) or on a Dask cluster; each run computed with single-threaded BLAS and
stored with the environment that computed it.

Part of the composition root: a run is ``fltr_audit.audit_run.run_audit``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Iterable

from fltr_audit.campaign_grid import Run
from fltr_audit.errors import FltrError
from fltr_audit.run_spec import RunSpec


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
    from threadpoolctl import threadpool_limits

    from fltr_audit.audit_run import run_audit

    start = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        tables = run_audit(spec)
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

    threading.Thread(target=watch, name="fltr-audit parent watchdog", daemon=True).start()


def execute_runs(runs: list[Run], run_fn: Callable[[RunSpec], dict], workers: int | None,
                 scheduler: str | None) -> Iterable[tuple[Run, dict | None, str | None]]:
    """Compute ``runs`` with ``run_fn`` (in this process, a spawned process pool of ``workers``, or
    on the Dask cluster at ``scheduler``), yielding ``(run, result, None)`` or ``(run, None, error)``
    as each finishes."""
    if not runs:
        return
    if scheduler is not None:
        yield from _execute_dask(runs, run_fn, scheduler)
        return
    workers = workers or os.cpu_count() or 1
    if workers < 1:
        raise FltrError("--workers must be at least 1")
    if workers == 1:
        for run in runs:
            try:
                yield run, run_fn(run.spec), None
            except Exception as exc:  # a failed run is recorded; the others go on
                yield run, None, _describe(exc)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=min(workers, len(runs)), mp_context=multiprocessing.get_context("spawn"),
                             initializer=_exit_with_parent, initargs=(os.getpid(),)) as pool:
        futures = {pool.submit(run_fn, run.spec): run for run in runs}
        for future in as_completed(futures):
            run = futures[future]
            try:
                yield run, future.result(), None
            except Exception as exc:
                from concurrent.futures.process import BrokenProcessPool

                if isinstance(exc, BrokenProcessPool):
                    raise FltrError("a worker process died; finished runs are stored, re-run the campaign to complete it") from None
                yield run, None, _describe(exc)


def check_scheduler(address: str) -> None:
    """FltrError naming ``--scheduler`` unless a Dask scheduler answers at ``address``."""
    _connect_dask(address).close()


def _connect_dask(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise FltrError("--scheduler needs dask.distributed: pip install 'fltr-audit[dask]'") from None
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise FltrError(f"--scheduler: cannot reach {address}: {' '.join(str(exc).split()) or type(exc).__name__}") from None


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
