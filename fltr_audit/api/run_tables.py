"""The result tables of a campaign's runs, computed in memory or recorded in a results store (then
read back): what ``fltr_audit.audit``, ``fltr_audit.audit_campaign`` and the ``audit`` command
return."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pandas as pd

from fltr_audit.errors import FltrError, RunsFailed
from fltr_audit.runs.campaign import run_campaign
from fltr_audit.runs.campaign import execute_run
from fltr_audit.runs.executors import SERIAL, Executor, Task, describe, environment
from fltr_audit.spec.campaign import CampaignSpec
from fltr_audit.spec.grid import Run, expand
from fltr_audit.spec.run import run_key
from fltr_audit.store.results import ResultsStore, load

OnDone = Callable[[Run, "str | None"], None]
"""Called once per finished run (with its error, or None): a progress bar's step."""


def campaign_tables(spec: CampaignSpec, store: Path | None = None, executor: Executor = SERIAL,
                    on_done: OnDone | None = None) -> dict[str, pd.DataFrame]:
    """Every table of the runs of ``spec``, each row with its ``run_key``. Without ``store`` the
    runs are computed and kept in memory; with one they are recorded there (completed runs
    reused) and read back. RunsFailed naming the first failure when a run failed."""
    runs = expand(spec)
    if store is not None:
        results = ResultsStore(store)
        run_campaign(spec, results, executor=executor, on_done=on_done)
        failed = results.status().query("status == 'failed'")
        if len(failed):
            first = failed.iloc[0]
            raise RunsFailed(f"{len(failed)} run(s) failed in {store}; run {first['run_key']}: {first['error']}")
        keys = {r.key for r in runs}
        return {name: t[t["run_key"].isin(keys)] if "run_key" in t else t for name, t in load(store).items()}
    by_key = {r.key: r for r in runs}
    finished: dict[str, dict] = {}
    for task, result, error in executor.map(execute_run, [Task(r.key, r.spec) for r in runs]):
        if on_done is not None:
            on_done(by_key[task.key], None if error is None else describe(error))
        if isinstance(error, FltrError):  # bad input found inside the run: said as the engine said it
            raise error
        if error is not None:
            raise RunsFailed(f"run {task.key} failed: {describe(error)}")
        finished[task.key] = result["tables"]
    collected: dict[str, list[pd.DataFrame]] = {"runs": [pd.DataFrame(  # as a store keeps them: what each run was
        {"run_key": [r.key for r in runs], "campaign": spec.name, "status": "done",
         "config": [json.dumps(r.config, sort_keys=True) for r in runs], "seed": [r.spec.seed for r in runs],
         "error": None})]}
    for run in runs:  # in grid order, whatever order the executor finished them in
        for name, table in finished[run.key].items():
            collected.setdefault(name, []).append(table.assign(run_key=run.key))
    return {name: pd.concat(parts, ignore_index=True) for name, parts in collected.items()}


def record_row(store: Path, command: str, config: dict, seed: int, seconds: float, table: str, row: dict) -> str:
    """Write one command's result ``row`` into ``table`` of a results store, as one run keyed by its
    ``config`` (``audit-run``, ``audit-unlearning``); return the key."""
    key = run_key(config)
    ResultsStore(store).record_run(key, command, config, environment(), seed, seconds, {table: pd.DataFrame([row])})
    return key
