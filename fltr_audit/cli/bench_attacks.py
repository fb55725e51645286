"""``fltr-audit bench attacks``: speed of the attacks on many intercepted messages of real FPDGD
probe steps (``fltr_audit.api.bench_attacks``)."""

from __future__ import annotations

import typer

from fltr_audit.cli.app import bench_app
from typing import List

from fltr_audit.cli import options as o
from fltr_audit.cli.common import emit_json, print_table


@bench_app.command("attacks")
def bench_attacks(
    messages: int = typer.Option(10_000, "--messages", help="Intercepted messages (one client each)."),
    features: int = typer.Option(136, "--features", help="Features per document (= parameters of the linear ranker)."),
    k: int = typer.Option(10, "--k", help="Documents shown per query."),
    queries_per_client: o.QueriesPerClient = 1,
    noise: float = typer.Option(0.0, "--noise", help="Gaussian noise standard deviation added to every message "
                                                     "(bayes is told so)."),
    attack: List[str] = typer.Option(["olsr", "olsr-l1", "score", "prob", "distance", "bayes"], "--attack",
                                     help="Attack(s) to time: repeat or comma-separate."),
    repeats: int = typer.Option(3, "--repeats", help="Timed repetitions; the best is reported."),
    seed: o.Seed = 0,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Time the attacks on a synthetic round of real FPDGD steps (deterministic top k of 15
    random documents, navigational clicks, one PDGD step per query), best of --repeats, with
    their macro precision and recall."""
    from fltr_audit.api.bench_attacks import TARGET_SECONDS, bench_attacks as run  # start-up: the engine loads here

    result = run(messages, features, k, queries_per_client, noise, attack, repeats, seed)
    if json_out:
        emit_json(result)
        return
    rows, totals, standard = result["results"], result["totals"], result["target_seconds"] is not None
    shown = [{"attack": r["attack"], "seconds": f"{r['seconds']:.3f}", "precision": f"{r['precision']:.3f}",
              "recall": f"{r['recall']:.3f}", "auc": f"{r['auc']:.3f}"} for r in rows]
    for group, total in totals.items():
        target = f" (target < {TARGET_SECONDS[group]:g} s)" if standard else ""
        shown.append({"attack": group, "seconds": f"{total:.3f}{target}", "precision": "", "recall": "", "auc": ""})
    print_table(f"bench attacks: {messages:,} messages x {queries_per_client} x {k} docs, {features} features "
                f"(best of {repeats}; real FPDGD steps)", shown)
