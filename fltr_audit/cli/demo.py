"""`fltr-audit demo`: the whole audit on the embedded synthetic default, in about a minute
(``fltr_audit.api.demo_run``; this module reads the options and prints the verdicts)."""

from __future__ import annotations

from pathlib import Path

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_glossary_pointer
from fltr_audit.cli.progress import progress
from fltr_audit.spec.audit_options import DEMO_MIN_EFFECT, DEMO_POWER



@app.command("demo")
def demo(
    algorithm: o.OptionalAlgorithm = "fpdgd",
    data: o.Data = "synthetic:mq2008",
    out: Path = typer.Option(Path("fltr-audit-demo"), "--out", help="Folder for the store and the report."),
    rounds: o.Rounds = 20,
    clients: o.Clients = 1000,
    seed: o.Seed = 0,
    workers: o.Workers = 0,
    scheduler: o.Scheduler = None,
    min_effect: o.MinEffect = DEMO_MIN_EFFECT,
    probe_lists: o.ProbeLists = None,
    power: o.Power = DEMO_POWER,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Train FPDGD, attack it under five defenses (one a pure-noise control), compute the FOLtR-ES epsilon table, write the report."""
    # start-up: the engine loads when the command runs
    from fltr_audit.api.demo_run import demo_steps, run_demo
    from fltr_audit.api.verdict_tables import print_verdicts
    from fltr_audit.runs.executors import Executor

    executor = Executor(workers=o.workers_of(workers), scheduler=scheduler)
    steps = 0 if quiet or json_out else demo_steps(out / "results.sqlite", algorithm=algorithm, data=data,
                                                   rounds=rounds, clients=clients, seed=seed, min_effect=min_effect,
                                                   probe_lists=probe_lists, power=power)
    with progress(steps, "demo", quiet or json_out) as bar:
        result = run_demo(algorithm=algorithm, data=data, out=out, rounds=rounds, clients=clients, seed=seed,
                          executor=executor, min_effect=min_effect, probe_lists=probe_lists, power=power,
                          progress=bar)
    if json_out:
        emit_json(result.as_json())
        return
    print_verdicts(result.verdicts, result.min_effect)
    counts = result.counts
    typer.echo(f"\n{counts['done']} runs computed, {counts['skipped']} reused (the trainings and the FOLtR-ES "
               f"epsilon table) from {out / 'results.sqlite'} "
               f"in {result.seconds:.0f} s")
    typer.echo(f"report: {result.report}")
    print_glossary_pointer()
