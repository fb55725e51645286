"""The report's "Unlearning" table: one row per unlearning audit (``unlearning_audits``, ``fltr-audit
audit-unlearning``) -- the method, its forgetting bound and verdict (observer of the unlearned model),
what the before/after pair tells the server, the leakage of clicks from the difference, nDCG@10
against ``retrain``, the poisoning check and the cost against ``retrain``."""

from __future__ import annotations

import pandas as pd

COLUMNS = {"algorithm": "algorithm", "ranker": "ranker", "method": "method", "forgotten": "users forgotten",
           "bound": "forgetting: ε lower bound (observer, 95 %)", "verdict": "verdict",
           "power": "would catch (share of the trained model's offset)",
           "server": "server: ε lower bound (before/after)", "server_verdict": "server verdict",
           "difference": "clicks from the difference", "ndcg": "nDCG@10 (Δ vs retrain)",
           "distance": "distance to retrain", "poison": "poisoning check", "cost": "seconds (retrain)",
           "stored": "bytes kept"}
"""The table's columns, in order, with their headers."""


def _g(x: float) -> str:
    return "n/a" if x != x else f"{x:.3g}"


def unlearning_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The table of ``unlearning_audits`` rows (module docstring), in stored order."""
    r = rows.reset_index(drop=True)
    limit = r["limited_by_canaries"].astype(bool)
    return pd.DataFrame({
        "algorithm": r["algorithm"], "ranker": r["ranker"], "method": r["method"],
        "forgotten": [f"{f} ({k} + {i} canaries)" for f, k, i in zip(r["forgotten"], r["forget"], r["included"])],
        "bound": [_g(v) + (" (canary-count limit)" if lim else "") for v, lim in zip(r["epsilon_lb"], limit)],
        "verdict": r["verdict"],
        "power": [_g(v) for v in r["detectable_residue"].astype(float)],
        "server": [f"{_g(p)} (before alone {_g(b)})" for p, b in zip(r["server_epsilon_lb"],
                                                                     r["before_alone_epsilon_lb"])],
        "server_verdict": r["server_verdict"],
        "difference": [f"{v} ({a} {_g(x)})" if a else v for v, a, x in
                       zip(r["difference_verdict"], r["difference_attack"].fillna(""),
                           r["difference_leakage"].astype(float))],
        "ndcg": [f"{n:.4f} ({d:+.4f})" for n, d in zip(r["ndcg10"], r["ndcg10_delta"])],
        "distance": [_g(v) for v in r["weight_distance"]],
        "poison": [v if v == "not run" else f"{v} ({_g(x)} removed)" for v, x in
                   zip(r["poison_verdict"], r["poison_effect_removed"].astype(float))],
        "cost": [f"{s:.2f} ({t:.2f})" for s, t in zip(r["seconds"], r["retrain_seconds"])],
        "stored": r["stored_bytes"],
    }).rename(columns=COLUMNS)


NOTE = ("One row per method audited with canaries (fltr-audit audit-unlearning): canary clients of the population, "
        "each included with probability 1/2, every included one forgotten with the other users. Forgetting bound: "
        "Steinke et al.'s one-run lower bound on the ε with which the unlearned model tells included canaries from "
        "excluded ones, scored against the model retrained without any canary (sound at 95 %; 'canary-count limit': "
        "the canaries could not show more). Verdict: not forgotten (bound > 0), forgotten (0, while the trained "
        "model's own bound is not: the audit had power, 'would catch' the smallest share of the trained model's "
        "offset it detects), untestable. Server: the bound from the before/after pair beside the before model "
        "alone; its verdict says whether the pair tells more (McNemar, 5 %). Clicks from the difference: the "
        "project's attacks on the before/after difference against the counterfactual. nDCG@10 on the test split "
        "and the weight distance against retrain; the poisoning check (ECIR 2024): the forgotten users clicked "
        "on inverted labels, and the share of their effect on nDCG@10 that forgetting removed. Seconds: the "
        "unlearning alone, retrain's beside it.")
