"""``fltr-audit audit-defense STACK``: a defense stack audited as a mechanism on two neighbouring
inputs (``fltr_audit.api.defense_audit``; this module reads the options and prints the rows)."""

from __future__ import annotations

import math

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_table
from fltr_audit.cli.progress import progress


@app.command("audit-defense")
def audit_defense(
    stack: str = typer.Argument(..., help="Defense stack, e.g. 'dp-local-laplace(eps=1)' or 'clip+dp-distributed'."),
    dim: int = typer.Option(46, "--dim", help="Message dimension D (natural neighbours: 46 or 136)."),
    trials: o.Trials = "100000",
    neighbours: str = typer.Option("worst-case", "--neighbours", help="worst-case | natural."),
    rounds: int = typer.Option(1, "--rounds", help="K outputs per trial, combined (sum of per-round tests)."),
    probe_cohort: int = typer.Option(10, "--probe-cohort", help="Cohort size C (dp-distributed's shares; the aggregate)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the audit (and of the natural messages' model)."),
    test: str = typer.Option("auto", "--test", help="auto (the noise family's likelihood ratio) | learned."),
    confidence: o.Confidence = 0.95,
    aggregate_trials: int = typer.Option(20_000, "--aggregate-trials",
                                         help="At most this many trials for a cohort-aggregate row (one defense "
                                              "call per trial)."),
    store: o.Store = None,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Audit a defense stack as a mechanism: an empirical lower bound on epsilon (and on Gaussian-DP
    mu) from the error rates of the noise family's likelihood-ratio test on worst-case or
    natural neighbours, beside the claim per round composed over --rounds."""
    from fltr_audit.api.defense_audit import audit_defense as run  # start-up: the engine loads here

    with progress(1, f"audit-defense {stack}", quiet or json_out) as bar:
        result = run(stack, dim=dim, trials=trials, neighbours=neighbours, rounds=rounds, probe_cohort=probe_cohort,
                     seed=seed, test=test, confidence=confidence, aggregate_trials=aggregate_trials, store=store)
        bar.advance()
    if json_out:
        emit_json({"audits": result.rows, "privacy": result.privacy, "run_key": result.run_key})
        return
    rows = result.rows
    n_trials = max(r["n_trials"] for r in rows)
    if result.capped:
        print(f"--trials auto: capped at {n_trials:,} trials per input; the claim needs more to be tested well")
    print_table(f"audit of {rows[0]['mechanism']} ({neighbours} neighbours, D = {dim}, {n_trials:,} trials per input, "
                f"{rounds} round{'s' * (rounds > 1)})", [
        {"scope": r["audited_scope"], "test": r["test"], "claimed ε": f"{r['claimed_epsilon']:.3g}",
         "audited ε ≥": f"{r['epsilon_lb']:.3f}" + (" (trial limit)" if r["trial_limited"] else ""),
         "ceiling": f"{r['ceiling']:.2f}", "lb / claim": "" if math.isnan(r["tightness"]) else f"{r['tightness']:.2f}",
         "μ": "" if math.isnan(r["mu"]) else f"{r['mu']:.3f}", "μ ≥": "" if math.isnan(r["mu_lb"]) else f"{r['mu_lb']:.3f}",
         "FPR": f"{r['fpr']:.4f}", "FNR": f"{r['fnr']:.4f}", "verdict": r["claim_verdict"],
         "trials": f"{r['n_trials']:,}", "seconds": f"{r['seconds']:.1f}"} for r in rows], min_width=190)
