"""Speed of the attacks on many intercepted messages of real FPDGD probe steps
(``attacks.synthetic.pdgd_batch``): ``fltr-audit bench attacks``. Measured, never asserted."""

from __future__ import annotations

from typing import Any, Sequence

from attacks.bayes import NoiseModel
from attacks.registry import make_attack
from attacks.scoring import score_guess, summarize
from attacks.synthetic import pdgd_batch
from fltr_audit.base.timing import best_seconds
from fltr_audit.constraints import POSITIVE_INT, Interval, Options, check

BENCH_ATTACKS = ("olsr", "olsr-l1", "score", "prob", "distance", "bayes")
TARGET_SECONDS = {"olsr+score+prob+distance": 2.0, "olsr-l1": 2.0, "bayes": 10.0}
"""Targets on 10,000 single-query messages, 136 features, k = 10 (issue 13)."""


def bench_attacks(messages: int = 10_000, features: int = 136, k: int = 10, queries: int = 1, noise: float = 0.0,
                  attacks: Sequence[str] = BENCH_ATTACKS, repeats: int = 3, seed: int = 0) -> dict[str, Any]:
    """Time the attacks on a synthetic round of real FPDGD steps (deterministic top k of 15
    random documents, navigational clicks, one PDGD step per query), best of ``repeats``, with
    their macro precision and recall."""
    for name, value in (("messages", messages), ("features", features), ("k", k), ("queries", queries),
                        ("repeats", repeats)):
        check(name, value, POSITIVE_INT)
    check("noise", noise, (Interval(float, 0, None),))
    names = list(attacks)
    for name in names:
        check("attacks", name, (Options(BENCH_ATTACKS),))
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
    return {
        "messages": messages, "features": features, "k": k, "queries": queries, "noise": noise,
        "repeats": repeats, "seed": seed, "results": rows, "totals": totals,
        "target_seconds": TARGET_SECONDS if standard else None,
    }
