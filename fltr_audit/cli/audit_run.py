"""``fltr-audit audit-run``: the privacy a user spends over a whole training run, audited in one run
with canaries beside the accounted epsilon, and over R independent runs (``fltr_audit.runs.whole_run``
computes every figure; this module reads the options, stores and prints the row).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import typer

from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_table
from fltr_audit.store.records import RunAuditRecord as RunAudit
from fltr_audit.runs.robustness import POISON_HELP
from fltr_audit.runs.whole_run import RUNS_CAP, RunAuditOptions, canary_design, run_audit_run

__all__ = ["RUNS_CAP", "RunAuditOptions", "audit_run", "canary_design", "record_run_audit", "run_audit_run"]


def record_run_audit(store: Path, options: RunAuditOptions, out: RunAudit) -> str:
    """Write the row into the ``run_audits`` table of a results store, as one run."""
    import pandas as pd

    from fltr_audit.runs.campaign import environment, run_key
    from fltr_audit.store.results import ResultsStore

    config = {"command": "audit-run", **dataclasses.asdict(options)}
    if config["poison"] == "none":  # written only when set: the keys of earlier rows are unchanged
        del config["poison"]
    key = run_key(config)
    ResultsStore(store).record_run(key, "audit-run", config, environment(), options.seed, out.seconds,
                                   {"run_audits": pd.DataFrame([out.as_dict()])})
    return key


def _fmt(x: float) -> str:
    return "inf" if x == float("inf") else "n/a" if x != x else f"{x:.3g}"


@app.command("audit-run")
def audit_run(
    algorithm: str = typer.Argument(..., help="fpdgd | fedips | foltr-es (any algorithm that sends messages)."),
    defense: str = typer.Option("none", "--defense", help="Defense stack, e.g. 'dp-fedavg(noise_multiplier=1,clip=1)'."),
    canaries: int = typer.Option(200, "--canaries", help="Canaries (each present with probability 1/2)."),
    runs: int = typer.Option(1, "--runs", help=f"Independent runs for the multi-run bound (at most {RUNS_CAP})."),
    data: str = typer.Option("synthetic:mq2008", "--data", help="Folder with Fold1..5, a LETOR file, or synthetic:PROFILE."),
    fold: int = typer.Option(1, "--fold", help="Fold 1..5."),
    rounds: int = typer.Option(100, "--rounds", help="Training rounds."),
    clients: int = typer.Option(1000, "--clients", help="Cohort size per round."),
    population: Optional[int] = typer.Option(None, "--population", help="Persistent users the cohorts are drawn from."),
    queries_per_client: int = typer.Option(4, "--queries-per-client"),
    click_model: str = typer.Option("perfect", "--click-model"),
    seed: int = typer.Option(0, "--seed", help="Seed of the first run (run i uses seed + i)."),
    claim_verdict: bool = typer.Option(False, "--claim-verdict", help="Require a claim (exit 2 for a defense without one)."),
    poison: str = typer.Option("none", "--poison", help=POISON_HELP),
    workers: int = typer.Option(1, "--workers", help="Processes for the --runs runs (the same figures for any number)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Record the row in this results store (run_audits)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Audit the privacy a user spends over a whole run with canaries: one-run lower bounds (Steinke et
    al. 2023; f-DP, Mahloujifar et al. 2025, as mu-GDP and epsilon), one-run estimate (Andrew et al.
    2024), multi-run lower bound (--runs), beside the epsilon accounted over the run against the
    server and against an observer of the models; a Gaussian claim is judged as mu-GDP."""
    options = RunAuditOptions(algorithm=algorithm, defense=defense, canaries=canaries, runs=runs, data=data, fold=fold,
                              rounds=rounds, clients=clients, population=population,
                              queries_per_client=queries_per_client, click_model=click_model, seed=seed,
                              claim_verdict=claim_verdict, poison=poison)
    out = run_audit_run(options, workers=workers)
    key = record_run_audit(store, options, out) if store is not None else None
    if json_out:
        emit_json({**out.as_dict(), "run_key": key})
        return
    limit = " (the canary-count limit)" if out.limited_by_canaries else ""
    mu_limit = " (the canary-count limit)" if out.fdp_guesses and out.mu_lb >= out.mu_limit - 1e-9 else ""
    pool = f"{out.fdp_pool} canaries of {out.fdp_participations} participation{'s' * (out.fdp_participations != 1)}"
    print_table(f"privacy over the whole run: {out.algorithm}, {out.defense}, {out.rounds} rounds, {out.canaries} "
                f"canaries ({out.scope} scope), δ = {out.delta:g}", [
        {"figure": "one-run lower bound (Steinke et al., 95 %)", "ε": _fmt(out.epsilon_lb) + limit, "μ-GDP": ""},
        {"figure": f"one-run lower bound, f-DP (Mahloujifar et al., 95 %; {pool})",
         "ε": _fmt(out.epsilon_lb_fdp), "μ-GDP": _fmt(out.mu_lb) + mu_limit},
        {"figure": f"claim as μ-GDP over {out.fdp_participations} participation{'s' * (out.fdp_participations != 1)}",
         "ε": "", "μ-GDP": _fmt(out.mu_claimed) if out.mu_claimed == out.mu_claimed else "n/a (not Gaussian)"},
        {"figure": "one-run estimate (Andrew et al.; an estimate, 95 % bootstrap)",
         "ε": f"{_fmt(out.epsilon_estimate)} [{_fmt(out.estimate_low)}, {_fmt(out.estimate_high)}]", "μ-GDP": ""},
        {"figure": f"multi-run lower bound ({out.runs} runs)",
         "ε": _fmt(out.epsilon_lb_multi) if out.runs > 1 else "n/a (--runs 1)", "μ-GDP": ""},
        {"figure": f"accounted, the canaries' participations (≤ {out.canary_participations_max}), vs the server",
         "ε": _fmt(out.epsilon_accounted_canaries), "μ-GDP": ""},
        {"figure": "accounted vs the server: worst user / 99th percentile",
         "ε": f"{_fmt(out.epsilon_server)} / {_fmt(out.epsilon_server_q99)}", "μ-GDP": ""},
        {"figure": "accounted vs an observer of the released models only (sampling-amplified)",
         "ε": _fmt(out.epsilon_observer), "μ-GDP": ""},
    ])
    tested = (f"the f-DP bound μ {_fmt(out.mu_lb)} against the claim's μ {_fmt(out.mu_claimed)}, canary-count limit "
              f"μ {_fmt(out.mu_limit)}" if out.verdict_by == "f-DP mu" else
              f"the Steinke bound against the accounted ε, canary-count limit {_fmt(out.canary_limit)}")
    typer.echo(f"claim over the run: {out.claim_verdict.upper()} (claimed ε per round {_fmt(out.claimed_epsilon)}, "
               f"{out.claimed_scope} scope; {tested}); "
               f"nDCG@10 {out.ndcg10:.4f}; {out.seconds:.1f} s")
    if out.limited_by_canaries:
        typer.echo(f"the one-run bound {_fmt(out.epsilon_lb)} is set by the number of canaries, not the mechanism: "
                   "more canaries could show more")
