"""``fltr-audit bench attacks``: speed of OLSR and the heuristics on many intercepted messages."""

from __future__ import annotations

import typer

from attacks.registry import make_attack
from attacks.scoring import score_guess, summarize
from attacks.synthetic import synthetic_batch
from fltr_audit.cli.app import bench_app
from fltr_audit.cli.common import best_seconds, check_at_least, emit_json, print_table
from fltr_audit.errors import FltrError

BENCH_ATTACKS = ("olsr", "score", "prob", "distance")
TARGET_SECONDS = 2.0  # all four attacks on 10,000 single-query messages, 136 features, k = 10


@bench_app.command("attacks")
def bench_attacks(
    messages: int = typer.Option(10_000, help="Intercepted messages (one client each)."),
    features: int = typer.Option(136, help="Features per document (= parameters of the linear ranker)."),
    k: int = typer.Option(10, help="Documents shown per query."),
    queries: int = typer.Option(1, help="Queries per message (B)."),
    noise: float = typer.Option(0.0, help="Gaussian noise standard deviation added to every update."),
    repeats: int = typer.Option(3, help="Timed repetitions; the best is reported."),
    seed: int = typer.Option(0, help="Seed of the synthetic round."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Time OLSR and the score / probability / distance heuristics on a synthetic round of
    PDGD-shaped linear updates (best of --repeats), with their macro precision and recall."""
    check_at_least({"--messages": messages, "--features": features, "--k": k, "--queries": queries,
                    "--repeats": repeats})
    if noise < 0:
        raise FltrError(f"--noise: must be non-negative, got {noise}")
    batch = synthetic_batch(messages, queries_per_client=queries, k=k, n_features=features, noise=noise, seed=seed)
    rows = []
    for name in BENCH_ATTACKS:
        attack = make_attack(name)
        best = best_seconds(lambda: attack.guess(batch.view), repeats)
        macro = summarize(score_guess(attack.guess(batch.view), batch))[0]
        rows.append({"attack": name, "seconds": best, "precision": macro["precision"], "recall": macro["recall"]})
    total = sum(r["seconds"] for r in rows)
    standard = (messages, features, k, queries) == (10_000, 136, 10, 1)
    result = {
        "messages": messages, "features": features, "k": k, "queries": queries, "noise": noise,
        "repeats": repeats, "seed": seed, "results": rows, "total_seconds": total,
        "target_seconds": TARGET_SECONDS if standard else None,
    }
    if json_out:
        emit_json(result)
        return
    target = f" (target < {TARGET_SECONDS:g} s)" if standard else ""
    shown = [{"attack": r["attack"], "seconds": f"{r['seconds']:.3f}", "precision": f"{r['precision']:.3f}",
              "recall": f"{r['recall']:.3f}"} for r in rows]
    shown.append({"attack": "total", "seconds": f"{total:.3f}{target}", "precision": "", "recall": ""})
    print_table(f"bench attacks: {messages:,} messages x {queries} x {k} docs, {features} features "
                f"(best of {repeats})", shown)
