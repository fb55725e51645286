"""Hand-built result tables (contracts.md shapes) for the store, compare and report tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

DP = "clip(delta=5)+dp-distributed(eps=4.5)"
DEFENSES = ("none", DP, "secagg")
CLICK_MODELS = ("perfect", "informational")
SEEDS = (1, 2, 3)
FOLDS = (1, 2)
# mean F1 each attack reaches under each defense (the "truth" the noise is added to)
F1_MEAN = {("none", "olsr"): 0.80, ("none", "random-3"): 0.30,
           (DP, "olsr"): 0.45, (DP, "random-3"): 0.30,
           ("secagg", "olsr"): 0.31, ("secagg", "random-3"): 0.30}
NDCG_MEAN = {"none": 0.71, DP: 0.69, "secagg": 0.71}


def synthetic_runs(rounds: int = 4, doc_id: str = "q1-d7") -> list[dict]:
    """One dict per run (click model x seed x fold): run_key, config, seed and its tables."""
    runs = []
    for c, click in enumerate(CLICK_MODELS):
        for seed in SEEDS:
            for fold in FOLDS:
                rng = np.random.default_rng([c, seed, fold])
                key = f"run-{click}-{seed}-{fold}"
                base = dict(algo="fpdgd", data="mq2008", fold=fold, seed=seed, click_model=click)
                attacks, utility, curves, per_query, audits = [], [], [], [], []
                for defense in DEFENSES:
                    for attack in ("olsr", "random-3"):
                        for averaging in ("macro", "micro"):
                            f1 = F1_MEAN[defense, attack] + rng.normal(0, 0.03)
                            attacks.append(dict(
                                run_key=key, **base, defense=defense, threat_model="server",
                                attack=attack, averaging=averaging,
                                accuracy=0.6 + rng.normal(0, 0.02), precision=f1 + rng.normal(0, 0.02),
                                recall=f1 + rng.normal(0, 0.02), f1=f1, auc=0.5 + f1 / 2,
                                n_queries=50, probe_cohort=1, zero_division="0"))
                        # per query: 3 clicks, tp ~ Binomial(3, F1 mean), fp = fn = 3 - tp,
                        # so the query's precision = recall = F1 = tp / 3
                        for client in range(20):
                            tp = int(rng.binomial(3, F1_MEAN[defense, attack]))
                            per_query.append(dict(
                                run_key=key, click_model=click, defense=defense, attack=attack,
                                client=client, query=client * 2, n_shown=10, n_clicked=3,
                                tp=tp, fp=3 - tp, tn=4 + tp, fn=3 - tp,
                                precision=tp / 3, recall=tp / 3))
                    ndcg = NDCG_MEAN[defense] + rng.normal(0, 0.01)
                    utility.append(dict(run_key=key, **base, defense=defense, ndcg10=ndcg,
                                        expected_maxrr=0.4 + rng.normal(0, 0.01)))
                    for r in range(1, rounds + 1):
                        curves.append(dict(
                            run_key=key, defense=defense, round=r,
                            offline_ndcg10=(ndcg - 0.1 / r) if r % 2 == 0 else np.nan,
                            online_ndcg=0.5 + 0.01 * r, shown_ndcg=0.55 + 0.01 * r,
                            mean_update_norm=1.0 / r))
                    if defense == DP:
                        audits.append(dict(
                            run_key=key, algo="fpdgd", defense=defense, mechanism="laplace",
                            attack="distinguisher", threat_model="server", claimed_epsilon=4.5,
                            claimed_delta=0.0, claimed_scope="per round, per client message",
                            epsilon_point=1.2 + rng.normal(0, 0.1),
                            epsilon_lb=0.7 + rng.normal(0, 0.1), confidence=0.95, n_trials=1000,
                            fpr=0.2, fnr=0.3, neighbours="natural", audited_scope="message",
                            test="laplace-llr", fp=100, fn=150, n0=500, n1=500, ceiling=4.9,
                            trial_limited=False, mu=np.nan, mu_lb=np.nan, rounds=1,
                            claim_verdict="consistent", tightness=0.15, epsilon_total=90.0,
                            delta_total=0.0, rounds_participated=20.0))
                utility = pd.DataFrame(utility)
                none_ndcg = utility.loc[utility["defense"] == "none", "ndcg10"].iloc[0]
                utility.insert(utility.columns.get_loc("ndcg10") + 1, "ndcg10_delta",
                               utility["ndcg10"] - none_ndcg)
                tables = {"attacks": pd.DataFrame(attacks), "utility": utility,
                          "curves": pd.DataFrame(curves), "per_query": pd.DataFrame(per_query),
                          "audits": pd.DataFrame(audits)}
                if c == 0 and seed == SEEDS[0] and fold == FOLDS[0]:
                    tables["epsilon"] = epsilon_table(key, doc_id)
                config = dict(base, campaign="synthetic", rounds=rounds, doc=doc_id)
                runs.append(dict(run_key=key, config=config, seed=seed, tables=tables))
    return runs


def epsilon_table(run_key: str, note: str) -> pd.DataFrame:
    rows = []
    for click in CLICK_MODELS:
        for p in (0.5, 0.7, 0.9):
            eps = (1.0 if click == "perfect" else 0.6) * np.log(p / (1 - p)) * 3
            rows.append(dict(run_key=run_key, click_model=click, levels=3, length=10, p=p,
                             epsilon=eps, theoretical=np.log(p / (1 - p)) * 3, note=note))
    return pd.DataFrame(rows)


def synthetic_tables(**kwargs) -> dict[str, pd.DataFrame]:
    """All runs' tables concatenated, plus a ``runs`` table, as ``store.load`` returns them."""
    runs = synthetic_runs(**kwargs)
    names = ("curves", "attacks", "per_query", "audits", "utility", "epsilon")
    out = {n: pd.concat([r["tables"][n] for r in runs if n in r["tables"]], ignore_index=True)
           for n in names}
    out["runs"] = pd.DataFrame([dict(run_key=r["run_key"], campaign="synthetic", status="done",
                                     config="{}", env='{"numpy": "2.0"}', seed=r["seed"],
                                     seconds=1.0, finished_at="2026-01-01T00:00:00+00:00",
                                     error=None) for r in runs])
    return out
