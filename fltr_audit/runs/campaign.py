"""Run a campaign into a results store: every pending grid point claimed, executed on the chosen
executor and recorded as it finishes (``run_campaign``). The campaign file format is described in
``fltr_audit.spec.campaign_tables``."""

from __future__ import annotations

import threading
import time
from contextlib import closing, contextmanager
from functools import partial
from typing import Any, Callable, Iterator

import pandas as pd

from fltr_audit.runs.audit import run_audit
from fltr_audit.runs.executors import SERIAL, Executor, Task, describe, environment, single_threaded
from fltr_audit.runs.unlearning import unlearning_audit
from fltr_audit.runs.whole_run import whole_run_audit
from fltr_audit.spec.unlearning import UnlearningOptions
from fltr_audit.spec.whole_run import CanaryOptions
from fltr_audit.spec.campaign import CampaignSpec
from fltr_audit.spec.grid import MAX_RUNS, Run, expand
from fltr_audit.spec.run import RunSpec
from fltr_audit.store.results import CLAIM_LEASE_SECONDS


def execute_run(spec: RunSpec) -> dict:
    """Compute one run in this process: its tables, timing and environment (picklable)."""
    start = time.perf_counter()
    tables = single_threaded(run_audit, spec)
    if spec.audit.run_canaries is not None:  # the campaign's [audit_run] section
        row = whole_run_audit(spec, CanaryOptions.of_run(spec))
        tables["run_audits"] = pd.DataFrame([row.as_dict()])
    if spec.audit.unlearning is not None:  # the campaign's [unlearning] table
        row = unlearning_audit(spec, UnlearningOptions.of_run(spec))
        tables["unlearning_audits"] = pd.DataFrame([row.as_dict()])
    return {"tables": tables, "seconds": time.perf_counter() - start, "env": environment()}


def run_campaign(
    spec: CampaignSpec,
    store: Any,
    *,
    executor: Executor = SERIAL,
    on_done: Callable[[Run, str | None], None] | None = None,
    run_fn: Callable[[RunSpec], dict] = execute_run,
    max_runs: int | None = MAX_RUNS,
    stop: Any = None,
) -> dict[str, int]:
    """Run every pending grid point of ``spec`` and record each in ``store`` as it finishes.

    Runs already completed in the store are skipped. Runs go to the ``executor`` (serial, a
    local process pool or a Dask cluster; the same tables from each). A run that fails is recorded as failed
    with its error and the others go on. Each finished run is written in one transaction by
    this process alone, so an interrupted campaign leaves only whole runs behind.

    Pending runs are claimed in the store first (:meth:`ResultsStore.claim`); runs another
    live campaign process has claimed are left to it (``running_elsewhere``), so two
    campaigns on one store share the grid instead of both computing all of it. This process
    renews its claims while it works and releases the ones it did not finish.

    ``stop`` (a :class:`fltr_audit.runs.interrupts.GracefulStop`): once requested, no new run starts
    and the runs in flight are finished and recorded (``stopped`` counts the runs not started).

    Returns counts: ``{"done": ..., "failed": ..., "skipped": ..., "running_elsewhere": ...}``
    (and ``stopped`` when a stop was requested).
    """
    runs = expand(spec, max_runs)
    done_keys = store.completed_keys()
    pending = [r for r in runs if r.key not in done_keys]
    store.register_pending([(r.key, r.config) for r in pending], campaign=spec.name)
    mine = set(store.claim([r.key for r in pending]))
    counts = {"done": 0, "failed": 0, "skipped": len(runs) - len(pending),
              "running_elsewhere": sum(r.key not in mine for r in pending)}
    pending = [r for r in pending if r.key in mine]

    def finish(task: Task, result: dict | None, exception: BaseException | None) -> None:
        run, error = task.argument, None if exception is None else describe(exception)
        if error is None:
            store.record_run(run.key, spec.name, run.config, result["env"], run.spec.seed,
                             result["seconds"], result["tables"])
            counts["done"] += 1
        else:
            store.record_failure(run.key, spec.name, run.config, error)
            counts["failed"] += 1
        mine.discard(run.key)
        if on_done is not None:
            on_done(run, error)

    tasks = [Task(r.key, r) for r in pending]
    with _renewing(store, mine), closing(executor.map(partial(_run_of, run_fn), tasks, stop)) as outcomes:
        for task, result, error in outcomes:
            finish(task, result, error)
    if stop is not None and stop.requested:
        counts["stopped"] = len(mine)
    return counts


def _run_of(run_fn: Callable[[RunSpec], dict], run: Run) -> dict:
    return run_fn(run.spec)


@contextmanager
def _renewing(store: Any, held: set[str]) -> Iterator[None]:
    """Renew the claims in ``held`` (a set the caller shrinks as runs finish) every third of
    the lease while the block runs; release what is still held when it ends."""

    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(CLAIM_LEASE_SECONDS / 3):
            try:
                store.renew_claims(list(held))
            except Exception:  # a busy store: the next beat tries again
                pass

    thread = threading.Thread(target=beat, name="fltr-audit claim lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if held:
            store.release_claims(list(held))
