"""Attack campaigns: a TOML grid of audits, expanded into runs, executed and stored.

A campaign file has these tables (every key optional except ``name``)::

    name = "defense-comparison"
    seeds = [0, 1, 2]

    [data]
    spec = ["synthetic:mq2008"]          # paths or synthetic:PROFILE
    folds = [1]
    normalization = "zscore"             # none | query-minmax | zscore

    [algorithm]
    name = ["fpdgd"]                     # fpdgd | foltr-es | fedips | fedavg
    rounds = [20]
    clients = [1000]
    queries_per_client = [4]
    ranker = ["linear"]
    train_click_model = "perfect"
    params = { lr = 0.1 }                # algorithm-specific; list values expand too

    [probe]
    split = "vali"
    click_models = ["perfect", "navigational", "informational"]
    cohort = [100]
    queries_per_client = 1
    min_shown = 10
    require_click = true
    threat_model = "server"              # server | server-blind | server-malicious (a grid axis)
    manipulation = "isolate"             # server-malicious: isolate | inconsistent

    [audit]
    defenses = ["none", "clip(sensitivity=5)+dp-distributed(eps=4.5)", "secagg"]
    attacks = ["olsr", "score", "prob", "distance", "random3", "random4"]
    epsilon_audit = true
    trials = 10000                       # per input of the empirical epsilon audit

    [audit_run]                          # optional: each run also audits its whole run with canaries
    canaries = 1000                      # (fltr-audit audit-run; table run_audits), at most the population
    runs = 1                             # independent canary runs (multi-run bound from 2 on)

Grid axes: ``seeds``, ``data.spec``, ``data.folds``, every list of ``[algorithm]``
(including inside ``params``), ``probe.split``, ``probe.cohort``, ``probe.threat_model`` and
``audit.defenses``.
The click models and attacks of a run are evaluated inside it, on the same trained model
and the same probe, so they are lists but not axes. Each grid point is one run whose key is
the SHA-256 of its resolved configuration (canonical JSON), so the key is stable across
processes and machines and changes with any setting.

The parts: ``campaign_spec`` (schema, defaults, load and validate), ``campaign_grid``
(expand, run keys) and ``executors`` (serial, process pool, Dask; the run environment);
this module runs a campaign into a store and re-exports their public names.
"""

from __future__ import annotations

import threading
from contextlib import closing, contextmanager
from typing import Any, Callable, Iterator

from fltr_audit.spec.grid import MAX_RUNS, Run, expand, grid_size, run_key
from fltr_audit.spec.campaign import ALGORITHMS, CLICK_MODELS, DEFAULTS, load_spec, validate_spec
from fltr_audit.runs.executors import check_scheduler, environment, execute_run, execute_runs
from fltr_audit.spec.run import RunSpec

__all__ = ["ALGORITHMS", "CLICK_MODELS", "DEFAULTS", "MAX_RUNS", "Run", "RunSpec", "check_scheduler", "environment", "execute_run",
           "expand", "grid_size", "load_spec", "run_campaign", "run_key", "validate_spec"]


def run_campaign(
    spec: dict,
    store: Any,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    on_done: Callable[[Run, str | None], None] | None = None,
    run_fn: Callable[[RunSpec], dict] = execute_run,
    max_runs: int | None = MAX_RUNS,
    stop: Any = None,
) -> dict[str, int]:
    """Run every pending grid point of ``spec`` and record each in ``store`` as it finishes.

    Runs already completed in the store are skipped. Runs go to a local process pool of
    ``workers`` processes (default: the number of cores; 1 runs in this process) or, with
    ``scheduler``, to a Dask cluster at that address. A run that fails is recorded as failed
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
    store.register_pending([(r.key, r.config) for r in pending], campaign=spec["name"])
    mine = set(store.claim([r.key for r in pending]))
    counts = {"done": 0, "failed": 0, "skipped": len(runs) - len(pending),
              "running_elsewhere": sum(r.key not in mine for r in pending)}
    pending = [r for r in pending if r.key in mine]

    def finish(run: Run, result: dict | None, error: str | None) -> None:
        if error is None:
            store.record_run(run.key, spec["name"], run.config, result["env"], run.spec.seed,
                             result["seconds"], result["tables"])
            counts["done"] += 1
        else:
            store.record_failure(run.key, spec["name"], run.config, error)
            counts["failed"] += 1
        mine.discard(run.key)
        if on_done is not None:
            on_done(run, error)

    with _renewing(store, mine), closing(execute_runs(pending, run_fn, workers, scheduler, stop)) as outcomes:
        for run, result, error in outcomes:
            finish(run, result, error)
    if stop is not None and stop.requested:
        counts["stopped"] = len(mine)
    return counts


@contextmanager
def _renewing(store: Any, held: set[str]) -> Iterator[None]:
    """Renew the claims in ``held`` (a set the caller shrinks as runs finish) every third of
    the lease while the block runs; release what is still held when it ends."""
    from fltr_audit.store.results import CLAIM_LEASE_SECONDS

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
