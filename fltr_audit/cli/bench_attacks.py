"""``fltr-audit bench attacks``: speed of the attacks on many intercepted messages of real FPDGD
probe steps (``attacks.synthetic.pdgd_batch``)."""

from __future__ import annotations

import typer

from attacks.bayes import NoiseModel
from attacks.registry import make_attack
from attacks.scoring import score_guess, summarize
from attacks.synthetic import pdgd_batch
from fltr_audit.cli.app import bench_app
from fltr_audit.cli.common import best_seconds, check_at_least, emit_json, parse_list, print_table
from fltr_audit.constraints import Interval, check

BENCH_ATTACKS = ("olsr", "olsr-l1", "score", "prob", "distance", "bayes")
TARGET_SECONDS = {"olsr+score+prob+distance": 2.0, "olsr-l1": 2.0, "bayes": 10.0}
"""Targets on 10,000 single-query messages, 136 features, k = 10 (issue 13)."""


@bench_app.command("attacks")
def bench_attacks(
    messages: int = typer.Option(10_000, help="Intercepted messages (one client each)."),
    features: int = typer.Option(136, help="Features per document (= parameters of the linear ranker)."),
    k: int = typer.Option(10, help="Documents shown per query."),
    queries: int = typer.Option(1, help="Queries per message (B)."),
    noise: float = typer.Option(0.0, help="Gaussian noise standard deviation added to every message "
                                          "(bayes is told so)."),
    attack: str = typer.Option(",".join(BENCH_ATTACKS), "--attack", help="Comma-separated attacks to time."),
    repeats: int = typer.Option(3, help="Timed repetitions; the best is reported."),
    seed: int = typer.Option(0, help="Seed of the synthetic round."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Time the attacks on a synthetic round of real FPDGD steps (deterministic top k of 15
    random documents, navigational clicks, one PDGD step per query), best of --repeats, with
    their macro precision and recall."""
    check_at_least({"--messages": messages, "--features": features, "--k": k, "--queries": queries,
                    "--repeats": repeats})
    check("--noise", noise, (Interval(float, 0, None),))
    names = parse_list(attack, "--attack", BENCH_ATTACKS)
    batch, algorithm = pdgd_batch(messages, queries_per_client=queries, k=k, n_features=features, noise=noise,
                                  seed=seed, candidates=max(15, k))
    rows = []
    for name in names:
        params = {}
        if name == "bayes":
            params = {"algorithm": algorithm, "noise": NoiseModel("gaussian", noise) if noise > 0 else NoiseModel()}
        built = make_attack(name, **params)
        best = best_seconds(lambda: built.guess(batch.view), repeats)
        macro = summarize(score_guess(built.guess(batch.view), batch))[0]
        rows.append({"attack": name, "seconds": best, "precision": macro["precision"], "recall": macro["recall"],
                     "auc": macro["auc"]})
    standard = (messages, features, k, queries) == (10_000, 136, 10, 1)
    seconds = {r["attack"]: r["seconds"] for r in rows}
    groups = {"olsr+score+prob+distance": [seconds.get(a) for a in ("olsr", "score", "prob", "distance")],
              "olsr-l1": [seconds.get("olsr-l1")], "bayes": [seconds.get("bayes")]}
    totals = {g: sum(v) for g, v in groups.items() if all(x is not None for x in v)}
    result = {
        "messages": messages, "features": features, "k": k, "queries": queries, "noise": noise,
        "repeats": repeats, "seed": seed, "results": rows, "totals": totals,
        "target_seconds": TARGET_SECONDS if standard else None,
    }
    if json_out:
        emit_json(result)
        return
    shown = [{"attack": r["attack"], "seconds": f"{r['seconds']:.3f}", "precision": f"{r['precision']:.3f}",
              "recall": f"{r['recall']:.3f}", "auc": f"{r['auc']:.3f}"} for r in rows]
    for group, total in totals.items():
        target = f" (target < {TARGET_SECONDS[group]:g} s)" if standard else ""
        shown.append({"attack": group, "seconds": f"{total:.3f}{target}", "precision": "", "recall": "", "auc": ""})
    print_table(f"bench attacks: {messages:,} messages x {queries} x {k} docs, {features} features "
                f"(best of {repeats}; real FPDGD steps)", shown)
