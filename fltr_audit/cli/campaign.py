"""`fltr-audit campaign run|status|show`: run a TOML grid of audits into a results store."""

from __future__ import annotations

from pathlib import Path

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import campaign_app
from fltr_audit.cli.progress import progress
from fltr_audit.cli.common import emit_json, print_table
from fltr_audit.constraints import POSITIVE_INT, check
from fltr_audit.errors import FltrError, RunsFailed
from fltr_audit.runs.interrupts import Interrupted, graceful_stop


@campaign_app.command("run")
def run(
    spec: Path = typer.Argument(..., help="Campaign TOML file (see campaigns/)."),
    store: Path = typer.Option(..., "--store", help="SQLite results store (created if absent)."),
    workers: o.Workers = 0,
    scheduler: o.Scheduler = None,
    max_runs: int = typer.Option(1000, "--max-runs", help="Refuse grids with more runs than this."),
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Run every pending grid point of SPEC; completed runs in the store are skipped."""
    # start-up: the engine loads when the command runs
    from fltr_audit.runs.campaign import run_campaign
    from fltr_audit.runs.executors import Executor, check_scheduler
    from fltr_audit.spec.campaign import load_spec
    from fltr_audit.spec.grid import expand
    from fltr_audit.store.results import ResultsStore

    executor = Executor(workers=o.workers_of(workers), scheduler=scheduler)
    check("--max-runs", max_runs, POSITIVE_INT)
    parsed = load_spec(spec)
    runs = expand(parsed, max_runs)
    total = len(runs)
    if not quiet and not json_out:
        # start-up: loaded when the command runs, not for --help
        from fltr_audit.spec.plan import Plan

        typer.echo(f"campaign {parsed.name}: {total} runs in the grid")
        for line in Plan.of(parsed, total).lines(workers=o.workers_of(workers) or 2, campaign=True):
            typer.echo(line)
    if scheduler is not None:
        check_scheduler(scheduler)
    results = ResultsStore(store)
    pending = total - len({r.key for r in runs} & results.completed_keys())
    failures: list[str] = []
    with progress(pending, f"campaign {parsed.name}", quiet or json_out) as bar:

        def on_done(run, error):
            if error is not None:
                failures.append(f"run {run.key} failed: {error}")
                if not quiet and not json_out:
                    typer.echo(failures[-1], err=True)
            bar.advance()

        with graceful_stop() as stop:
            counts = run_campaign(parsed, results, executor=executor, on_done=on_done, max_runs=max_runs, stop=stop)
    if stop.requested:
        raise Interrupted(f"{counts['done']} runs finished and stored, {counts.get('stopped', 0)} not started; "
                          f"run the campaign again to complete it -> {store}")
    counts["total"] = total
    if json_out:
        emit_json({**counts, "store": str(store), "failures": failures})
    else:
        typer.echo(
            f"campaign {parsed.name}: {counts['done']} done, {counts['failed']} failed, "
            f"{counts['skipped']} already complete, {counts['running_elsewhere']} left to another campaign "
            f"process, {total} runs in the grid -> {store}"
        )
    if counts["failed"]:
        raise RunsFailed(f"{counts['failed']} of {total} runs failed, stored as failed in {store}; first: {failures[0]}")


@campaign_app.command("status")
def status(
    store: Path = typer.Option(..., "--store", help="SQLite results store."),
    json_out: bool = typer.Option(False, "--json", help="Print one record per run as JSON."),
) -> None:
    """List the runs of a store: done, failed and pending, with every setting the campaign sweeps."""
    # start-up: loaded when the command runs, not for --help
    from fltr_audit.store.results import ResultsStore
    from reports.sweeps import axis_name, with_swept_settings

    if not store.is_file() and not store.is_symlink():
        raise FltrError(f"--store: {store} does not exist")
    results = ResultsStore(store, readonly=True)
    table = with_swept_settings(results.status(), results.configs())
    if json_out:
        emit_json(table.to_dict(orient="records"))
        return
    if table.empty:
        typer.echo("no runs recorded")
        return
    counts = table["status"].value_counts().to_dict()
    swept = table.attrs.get("swept") or []
    one = table["campaign"].nunique(dropna=False) == 1  # one campaign: named in the title, not in every row
    dropped = ["finished_at", *(["campaign"] if one else [])]
    shown = table.drop(columns=dropped).astype(object).where(table.drop(columns=dropped).notna(), "")
    print_table((f"campaign {table['campaign'].iloc[0]}: " if one else "")
                + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("done", "failed", "pending"))
                + (f"; swept: {', '.join(axis_name(a) for a in swept)}" if swept else ""),
                [{k: (f"{v:.1f}" if k == "seconds" and v != "" else v) for k, v in row.items()}
                 for row in shown.to_dict(orient="records")], min_width=110)
