"""``fltr-audit audit-unlearning``: forgetting audited in one run with canaries -- what the unlearned
model (an observer) and the before/after pair (the server) still tell about the forgotten clients
(``fltr_audit.api.unlearning``; this module reads the options and prints the row)."""

from __future__ import annotations

import textwrap
from typing import Optional

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, print_table
from fltr_audit.cli.progress import progress


def _fmt(x: float) -> str:
    return "inf" if x == float("inf") else "n/a" if x != x else f"{x:.3g}"


@app.command("audit-unlearning")
def audit_unlearning(
    algorithm: o.Algorithm,
    method: str = typer.Option("federaser", "--method", help="retrain | federaser | finetune | pga | none."),
    forget: int = typer.Option(0, "--forget", help="Population users forgotten besides the included canaries."),
    canaries: o.Canaries = 40,
    interval: int = typer.Option(5, "--interval", help="FedEraser: rounds between the updates the server keeps."),
    calibration: float = typer.Option(0.5, "--calibration", help="FedEraser: calibration queries, a share of B."),
    unlearn_rounds: Optional[int] = typer.Option(None, "--unlearn-rounds",
                                                 help="Rounds of finetune and of each phase of pga (default: a "
                                                      "tenth of --rounds)."),
    scale: float = typer.Option(10.0, "--scale", help="A canary's step, in median update norms of its round."),
    poison_check: bool = typer.Option(False, "--poison-check",
                                      help="Also the ECIR 2024 check: the forgotten users poison the run "
                                           "(inverted clicks), and forgetting them must remove their effect."),
    defense: o.Defense = "none",
    data: o.Data = "synthetic:mq2008",
    fold: o.Fold = 1,
    normalization: str = typer.Option("none", "--normalization", help="none | query-minmax | zscore."),
    rounds: o.Rounds = 100,
    clients: o.Clients = 100,
    population: o.Population = 1000,
    queries_per_client: o.QueriesPerClient = 4,
    click_model: o.ClickModel = None,
    ranker: o.Ranker = "linear",
    non_iid: o.NonIID = "iid",
    seed: o.Seed = 0,
    confidence: o.Confidence = 0.95,
    workers: o.Workers = 1,
    scheduler: o.Scheduler = None,
    store: o.Store = None,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Audit forgetting in one run: canary clients drawn from the population, each included with
    probability 1/2, are forgotten with --forget other users by --method; the unlearned model's
    one-run bound on the epsilon of forgetting (Steinke et al.; f-DP, Mahloujifar et al.) and
    verdict, what the before/after pair tells the server, click recovery from the difference,
    nDCG@10 and cost against retrain."""
    # start-up: the engine loads here
    from fltr_audit.api.unlearning import record_unlearning, unlearning_spec
    from fltr_audit.runs.executors import Executor
    from fltr_audit.runs.unlearning import unlearning_audit
    from fltr_audit.spec.unlearning import check_unlearning

    spec, options = unlearning_spec(algorithm, dict(
        method=method, forget=forget, canaries=canaries, interval=interval, calibration=calibration,
        unlearn_rounds=unlearn_rounds, scale=scale, poison_check=poison_check, defense=defense, data=data,
        fold=fold, normalization=normalization, rounds=rounds, clients=clients, population=population,
        queries_per_client=queries_per_client, click_model=click_model, ranker=ranker, non_iid=non_iid, seed=seed,
        confidence=confidence))
    check_unlearning(spec, options)
    with progress(1, f"audit-unlearning: {method}, {canaries} canaries", quiet or json_out) as bar:
        out = unlearning_audit(spec, options, Executor(workers=o.workers_of(workers), scheduler=scheduler))
        bar.advance()
    key = record_unlearning(store, spec, options, out) if store is not None else None
    if json_out:
        emit_json({**out.as_dict(), "run_key": key})
        return
    print_unlearning(out)


def print_unlearning(out) -> None:
    """The figures table and the verdict lines of an unlearning audit."""
    limit = " (the canary-count limit)" if out.limited_by_canaries else ""
    print_table(f"forgetting: {out.algorithm} ({out.ranker}), {out.method}, {out.forgotten} users forgotten "
                f"({out.forget} + {out.included} of {out.canaries} canaries), δ = {out.delta:g}", [
        {"who": "observer (unlearned model)", "ε lower bound": _fmt(out.epsilon_lb) + limit,
         "μ (f-DP)": _fmt(out.mu_lb), "TPR @ 1 % / 0.1 % FPR": f"{_fmt(out.tpr_at_fpr_0_01)} / "
                                                                f"{_fmt(out.tpr_at_fpr_0_001)}", "AUC": _fmt(out.auc)},
        {"who": "the trained model (before)", "ε lower bound": _fmt(out.before_epsilon_lb), "μ (f-DP)": "",
         "TPR @ 1 % / 0.1 % FPR": "", "AUC": ""},
        {"who": "server: before/after pair", "ε lower bound": _fmt(out.server_epsilon_lb), "μ (f-DP)": "",
         "TPR @ 1 % / 0.1 % FPR": "", "AUC": _fmt(out.server_auc)},
        {"who": "server: before model alone", "ε lower bound": _fmt(out.before_alone_epsilon_lb), "μ (f-DP)": "",
         "TPR @ 1 % / 0.1 % FPR": "", "AUC": ""},
    ])
    power = (f"; it would have caught {_fmt(out.detectable_residue)} of the trained model's offset"
             if out.verdict == "forgotten" else "")
    _line(f"verdict: {out.verdict.upper()} ({out.eligible} canaries drawn, canary-count limit "
               f"{_fmt(out.canary_limit)}{power})")
    _line(f"server: {out.server_verdict} (pair right where the before model is wrong: {out.server_pair_only}, "
               f"the reverse: {out.server_before_only})")
    _line(f"clicks from the before/after difference: {out.difference_verdict} ({out.difference_attack or 'n/a'} "
               f"{_fmt(out.difference_leakage)}, upper {_fmt(out.difference_leakage_ci_high)}); from the kept updates: "
               f"{out.stored_verdict}")
    _line(f"nDCG@10 {out.ndcg10:.4f} (retrain {out.ndcg10_retrain:.4f}, before {out.ndcg10_before:.4f}); "
               f"distance to retrain {out.weight_distance:.3g}; poisoning check: {out.poison_verdict}")
    _line(f"cost: {out.seconds:.2f} s, {out.client_steps:,} client steps, {out.stored_bytes:,} bytes kept "
               f"(retrain {out.retrain_seconds:.2f} s, {out.retrain_client_steps:,} client steps)")


def _line(text: str) -> None:
    """A verdict line wrapped at the console tables' 100 columns, continued under an indent."""
    typer.echo(textwrap.fill(text, 100, subsequent_indent="  ", break_on_hyphens=False))
