"""`fltr-audit demo`: the whole audit on the embedded synthetic default, in about a minute."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import typer

from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, progress
from fltr_audit.cli.compare import check_min_effect, min_effect_option
from fltr_audit.errors import FltrError

DEMO_DEFENSES = ["none", "clip(sensitivity=5)+dp-distributed(eps=4.5)", "dp-local-laplace(eps=4.5)", "secagg",
                 "dp-local-laplace(eps=0.01)"]
"""The last is the pure-noise control: its messages carry (almost) nothing of the clicks, so its
leakage verdict must read 'no measurable leakage'."""
DEMO_MIN_EFFECT = 0.05
"""The demo's minimum effect (AUC): with DEMO_POWER it plans about 450 lists per click model."""
DEMO_POWER = 0.9
DEMO_ATTACKS = ["olsr", "olsr-l1", "score", "prob", "random3"]
EPSILON_P = [0.25, 0.5, 0.75, 0.9, 0.95, 0.99]
EPSILON_MODELS = ["perfect", "navigational", "informational"]


@app.command("demo")
def demo(
    data: str = typer.Option("synthetic:mq2008", "--data", help="Data set path or synthetic:PROFILE."),
    out: Path = typer.Option(Path("fltr-audit-demo"), "--out", help="Directory for the store and the report."),
    rounds: int = typer.Option(20, "--rounds", help="FPDGD training rounds."),
    clients: int = typer.Option(1000, "--clients", help="Clients per round."),
    seed: int = typer.Option(0, "--seed", help="Run seed."),
    workers: int = typer.Option(0, "--workers", help="Worker processes (0: one per core)."),
    min_effect: float = typer.Option(DEMO_MIN_EFFECT, "--min-effect",
                                     help="Smallest AUC leakage worth calling measurable (0-1)."),
    probe_lists: int = typer.Option(None, "--probe-lists",
                                    help="Lists to score per click model (default: planned by --power)."),
    power: float = typer.Option(DEMO_POWER, "--power",
                                help="Plan --probe-lists so that a leak of --min-effect is found, and zero "
                                     "leakage shown, with this probability (0-1)."),
    json_out: bool = typer.Option(False, "--json", help="Print the attack rows, verdicts and the report path as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Train FPDGD, attack it under five defenses (one a pure-noise control), compute the FOLtR-ES epsilon table, write the report."""
    from attacks.epsilon import epsilon_rows
    from fltr_audit.runs.campaign import expand, run_campaign, run_key
    from fltr_audit.engine.algorithms.registry import algorithm_spec
    from fltr_audit.cli.audit import audit_spec, available_lists, probe_size
    from fltr_audit.store.results import ResultsStore, load
    from fltr_audit.atomic import write_files
    from fltr_audit.cli.verdict_tables import print_verdicts
    from reports.compare import compare, verdicts
    from reports.render import render_report

    min_effect = check_min_effect(min_effect)
    probe_lists = probe_size(probe_lists, power, min_effect, DEMO_ATTACKS,
                             available_lists(data, [1], "vali", algorithm_spec("fpdgd").default_normalization, [seed]))
    if out.exists() and not out.is_dir():
        raise FltrError(f"--out {out}: exists and is not a directory")
    start = time.perf_counter()
    spec = audit_spec(algo="fpdgd", data=data, folds=[1], rounds=rounds, clients=clients, queries_per_client=4,
                      attacks=DEMO_ATTACKS, defenses=DEMO_DEFENSES, click_models=EPSILON_MODELS, split="vali",
                      seeds=[seed], cohort=100, probe_queries=1, normalization="auto", ranker="linear",
                      min_shown=10, require_click=True, epsilon_audit=True, name="demo", probe_lists=probe_lists)
    out.mkdir(parents=True, exist_ok=True)
    store = ResultsStore(out / "results.sqlite")
    failures = []
    with progress(len(expand(spec)) + 1, "demo", quiet or json_out) as bar:
        counts = run_campaign(spec, store, workers=workers or None,
                              on_done=lambda run, error: (failures.append(error) if error else None, bar.advance()))
        eps_config = {"campaign": "demo", "kind": "foltr-es epsilon table", "p": EPSILON_P, "models": EPSILON_MODELS}
        eps_key = run_key(eps_config)
        if eps_key not in store.completed_keys():
            t0 = time.perf_counter()
            store.record_run(eps_key, "demo", eps_config, {}, None, time.perf_counter() - t0,
                             {"epsilon": pd.DataFrame(epsilon_rows(EPSILON_MODELS, EPSILON_P))})
            counts["done"] += 1  # the epsilon table is a run of the store too (the report counts it)
        else:
            counts["skipped"] += 1
        bar.advance()
    if failures:
        raise FltrError(f"demo: {len(failures)} run(s) failed: {failures[0]}")
    tables = load(out / "results.sqlite")
    table = compare(tables, by=("defense",), min_effect=min_effect)
    v = verdicts(tables, min_effect=min_effect)
    command = (f"fltr-audit demo --data {data} --rounds {rounds} --clients {clients} --seed {seed} "
               f"--min-effect {min_effect:g} --probe-lists {probe_lists}")
    write_files(out / "report", render_report(tables, title="fltr-audit demo: FPDGD under five defenses",
                                              methods={"demo": command}, min_effect=min_effect))
    html = out / "report" / "report.html"
    seconds = time.perf_counter() - start
    if json_out:
        from reports.compare import as_references
        from reports.leakage import roc_rows

        emit_json({"attacks": as_references(table).to_dict(orient="records"), "verdicts": v.to_dict(orient="records"),
                   "roc": roc_rows(tables.get("attacks")).to_dict(orient="records"),
                   "report": str(html), "seconds": seconds, "runs": counts})
        return
    print_verdicts(v, min_effect)
    typer.echo(f"\n{counts['done']} runs computed, {counts['skipped']} reused (the trainings and the FOLtR-ES "
               f"epsilon table) from {out / 'results.sqlite'} "
               f"in {seconds:.0f} s")
    typer.echo(f"report: {html}")
