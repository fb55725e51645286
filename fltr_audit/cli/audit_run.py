"""``fltr-audit audit-run``: the privacy a user spends over a whole training run, audited in one run
with canaries beside the accounted epsilon, and over R independent runs (``fltr_audit.api.whole_run``;
this module reads the options and prints the row).
"""

from __future__ import annotations

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_table
from fltr_audit.cli.progress import progress


def _fmt(x: float) -> str:
    return "inf" if x == float("inf") else "n/a" if x != x else f"{x:.3g}"


@app.command("audit-run")
def audit_run(
    algorithm: o.Algorithm,
    defense: o.Defense = "none",
    canaries: o.Canaries = 200,
    runs: int = typer.Option(1, "--runs", help="Independent trainings for the multi-run bound (at most 1,000)."),
    data: o.Data = "synthetic:mq2008",
    fold: o.Fold = 1,
    rounds: o.Rounds = 100,
    clients: o.Clients = 1000,
    population: o.Population = None,
    queries_per_client: o.QueriesPerClient = 4,
    click_model: o.ClickModel = None,
    seed: int = typer.Option(0, "--seed", help="Seed of the first training (training i uses seed + i)."),
    confidence: o.Confidence = 0.95,
    claim_verdict: bool = typer.Option(False, "--claim-verdict", help="Require a claim (exit 2 for a defense without one)."),
    poison: o.Poison = "none",
    workers: o.Workers = 1,
    scheduler: o.Scheduler = None,
    store: o.Store = None,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Audit the privacy a user spends over a whole run with canaries: one-run lower bounds (Steinke et
    al. 2023; f-DP, Mahloujifar et al. 2025, as mu-GDP and epsilon), one-run estimate (Andrew et al.
    2024), multi-run lower bound (--runs), beside the epsilon accounted over the run against the
    server and against an observer of the models; a Gaussian claim is judged as mu-GDP."""
    # start-up: the engine loads here
    from fltr_audit.api.whole_run import record_whole_run, whole_run_spec
    from fltr_audit.runs.executors import Executor
    from fltr_audit.runs.whole_run import check_canaries, whole_run_audit

    spec, options = whole_run_spec(algorithm, dict(
        defense=defense, canaries=canaries, runs=runs, data=data, fold=fold, rounds=rounds, clients=clients,
        population=population, queries_per_client=queries_per_client, click_model=click_model, seed=seed,
        confidence=confidence, claim_verdict=claim_verdict, poison=poison))
    check_canaries(spec, options)
    with progress(runs, f"audit-run: trainings with {canaries} canaries", quiet or json_out) as bar:
        out = whole_run_audit(spec, options, Executor(workers=o.workers_of(workers), scheduler=scheduler), bar)
    key = record_whole_run(store, spec, options, out) if store is not None else None
    if json_out:
        emit_json({**out.as_dict(), "run_key": key})
        return
    print_whole_run(out)


def print_whole_run(out) -> None:
    """The figures table and the verdict line of a whole-run audit."""
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
         "ε": (f"{_fmt(out.epsilon_estimate)} [{_fmt(out.estimate_low)}, {_fmt(out.estimate_high)}]"
               if out.epsilon_estimate == out.epsilon_estimate else f"n/a ({out.epsilon_estimate_reason})"),
         "μ-GDP": ""},
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
    if out.claim_verdict == "untestable" and out.canaries_needed == out.canaries_needed:
        typer.echo(f"untestable with {out.canaries} canaries: about {out.canaries_needed:,.0f} canaries (same "
                   "participation) would let the bound reach the claim")
    if out.float_channel:
        typer.echo(f"floating-point side channel below the scores' rounding: {out.float_channel.upper()} "
                   f"(p = {out.float_channel_pvalue:.3g}; a finding of its own, beside the claim verdict)")
    if out.limited_by_canaries:
        typer.echo(f"the one-run bound {_fmt(out.epsilon_lb)} is set by the number of canaries, not the mechanism: "
                   "more canaries could show more")
