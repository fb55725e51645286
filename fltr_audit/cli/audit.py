"""``fltr-audit audit``: pre-train, probe every click model under every defense, attack, score, audit
the claims (``fltr_audit.api.audits``; this module reads the options and prints the tables)."""

from __future__ import annotations

from typing import Optional

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_glossary_pointer, print_table
from fltr_audit.cli.progress import progress
from fltr_audit.spec.audit_options import AuditOptions, DEFAULTS as D



@app.command("audit")
def audit(
    algorithm: o.OptionalAlgorithm = D.algorithm,
    data: o.Data = D.data,
    fold: o.Folds = list(D.folds),
    rounds: o.Rounds = D.rounds,
    clients: o.Clients = D.clients,
    queries_per_client: o.QueriesPerClient = D.queries_per_client,
    attack: o.Attacks = [],
    defense: o.Defenses = list(D.defenses),
    click_model: o.ClickModels = [],
    split: str = typer.Option(D.split, "--split", help="Probe split (Pham: vali)."),
    seed: o.Seeds = list(D.seeds),
    probe_cohort: o.ProbeCohort = D.probe_cohort,
    probe_queries: int = typer.Option(D.probe_queries, "--probe-queries", help="Queries per probe message."),
    normalization: o.Normalization = D.normalization,
    ranker: o.Ranker = D.ranker,
    min_shown: Optional[int] = typer.Option(None, "--min-shown", help="Score only lists with at least this many "
                                            "documents (default: a full list, 10, or K = 5 for FedIPS)."),
    require_click: bool = typer.Option(D.require_click, "--require-click/--all-lists", help="Score only lists with a click."),
    epsilon_audit: bool = typer.Option(D.epsilon_audit, "--epsilon-audit/--no-epsilon-audit",
                                       help="Audit each defense's claimed epsilon empirically."),
    trials: o.Trials = str(D.trials),
    counterfactual: int = typer.Option(D.counterfactual, "--counterfactual",
                                       help="Counterfactual click vectors drawn per probed list (the leakage baseline)."),
    population: o.Population = None,
    non_iid: o.NonIID = D.non_iid,
    poison: o.Poisons = list(D.poison),
    min_effect: o.MinEffect = D.min_effect,
    probe_lists: o.ProbeLists = None,
    power: o.Power = D.power,
    threat_model: o.ThreatModel = D.threat_model,
    manipulation: str = typer.Option(D.manipulation, "--manipulation",
                                     help="server-malicious: isolate (zero features for the others) | "
                                          "inconsistent (a saturated model for the others)."),
    store: o.Store = None,
    workers: o.Workers = 1,
    scheduler: o.Scheduler = None,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Audit a federated ranker: which clicks can the server guess from client messages?"""
    # start-up: the engine loads when the command runs
    from fltr_audit.api.audits import audit_campaign_of
    from fltr_audit.api.results import AuditResult
    from fltr_audit.api.run_tables import campaign_tables
    from fltr_audit.runs.executors import Executor
    from fltr_audit.spec.grid import expand

    options = AuditOptions(
        algorithm=algorithm, data=data, folds=tuple(fold), rounds=rounds, clients=clients,
        queries_per_client=queries_per_client, attacks=tuple(attack) or None, defenses=tuple(defense),
        click_models=tuple(click_model) or None, split=split, seeds=tuple(seed), probe_cohort=probe_cohort,
        probe_queries=probe_queries, normalization=normalization, ranker=ranker, min_shown=min_shown,
        require_click=require_click, epsilon_audit=epsilon_audit, trials=trials, counterfactual=counterfactual,
        population=population, non_iid=non_iid, poison=tuple(poison), min_effect=min_effect, probe_lists=probe_lists, power=power,
        threat_model=threat_model, manipulation=manipulation, store=None if store is None else str(store))
    spec = audit_campaign_of(options)
    executor = Executor(workers=o.workers_of(workers), scheduler=scheduler)
    runs = len(expand(spec))
    if not json_out:
        print_plan(spec, runs, workers)
    with progress(runs, "audit runs", quiet or json_out) as bar:
        tables = campaign_tables(spec, store, executor, on_done=lambda run, error: bar.advance())
    result = AuditResult(inputs=options.resolved(), spec=spec, tables=tables)
    if json_out:
        emit_json(result.as_json())
        return
    print_result(result)
    print_glossary_pointer()


def print_plan(spec, runs: int, workers: int) -> None:
    """The plan (lists per click model, why), its expected time and how to make it cheaper."""
    # start-up: loaded when the command runs, not for --help
    from fltr_audit.spec.plan import Plan

    for line in Plan.of(spec, runs).lines(workers=max(1, min(runs, o.workers_of(workers) or 2))):
        typer.echo(line)


def print_unscored(unscored) -> None:
    """One line per reason why attack rows scored no list (``AuditResult.unscored``)."""
    from fltr_audit.api.results import NO_COHORT, NO_SCORABLE_LIST  # start-up: loaded when the command runs

    no_cohort = unscored[unscored["reason"] == NO_COHORT]
    if len(no_cohort):
        lost, left_out = (int(no_cohort[c].fillna(0).sum()) if c in no_cohort else 0
                          for c in ("cohorts_lost", "queries_left_out"))
        typer.echo(f"{len(no_cohort)} attack row(s) scored no list: no probe cohort formed ({lost} lost to "
                   f"dropouts; {left_out} probe queries, counted over the passes, too few for a cohort the "
                   "aggregator accepts): probe a larger split")
    unscorable = int((unscored["reason"] == NO_SCORABLE_LIST).sum())
    if unscorable:
        typer.echo(f"{unscorable} attack row(s) scored no list: none of the probed lists was scorable (each needs "
                   "--min-shown shown documents, a click with --require-click, and one shown unclicked): probe "
                   "a larger split or lower --min-shown")


def print_result(result) -> None:
    """The attack table, both verdict tables, the malicious server's cost and the utility table."""
    # start-up: loaded when the command runs, not for --help
    from fltr_audit.api.verdict_tables import print_attacks, print_verdicts

    print_attacks(result.attacks)
    print_unscored(result.unscored)
    print_verdicts(result.verdicts, result.min_effect)
    cost = result.manipulation
    if len(cost):
        print_table("server-malicious: what the manipulation costs the other members (mean nDCG@10 of their "
                    "shown lists in the probed round)",
                    [{"clicks": r.click_model, "defense": r.defense, "manipulation": r.manipulation,
                      "honest": float(r.others_ndcg_honest), "served": float(r.others_ndcg_served),
                      "cost": float(r.others_ndcg_cost)} for r in cost.itertuples()])
    utility = result.utility
    if len(utility):
        keys = ["defense"] + (["poison"] if "poison" in utility.columns else [])
        mean = utility.assign(**({"poison": utility["poison"].fillna("none")} if "poison" in utility else {})) \
            .groupby(keys, sort=False)[["ndcg10", "ndcg10_delta"]].mean().reset_index()
        print_table("Utility: offline nDCG@10 on test (queries without relevant documents left out)",
                    [{**{k: getattr(r, k) for k in keys}, "nDCG@10": float(r.ndcg10),
                      "ΔnDCG@10": float(r.ndcg10_delta)} for r in mean.itertuples()])
