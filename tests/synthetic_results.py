"""Hand-built result tables (contracts.md shapes) for the store, compare and report tests.

Every list's leakage (AUC real - counterfactual) is drawn around a known true value
(``LEAK``), so that verdicts have a known right answer: none leaks, the DP stack leaks less,
secure aggregation does not leak measurably, the reference attack never leaks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

DP = "clip(sensitivity=5)+dp-distributed(eps=4.5)"
DEFENSES = ("none", DP, "secagg")
CLICK_MODELS = ("perfect", "informational")
SEEDS = (1, 2, 3)
FOLDS = (1, 2)
ATTACKS = ("olsr", "random-3")
REFERENCE = {"olsr": False, "random-3": True}
LISTS = 20  # probed lists per run, click model and defense
# mean F1 each attack reaches under each defense (the "truth" the noise is added to)
F1_MEAN = {("none", "olsr"): 0.80, ("none", "random-3"): 0.30,
           (DP, "olsr"): 0.45, (DP, "random-3"): 0.30,
           ("secagg", "olsr"): 0.31, ("secagg", "random-3"): 0.30}
# true per-list leakage (AUC real - counterfactual) and its spread over lists
LEAK = {("none", "olsr"): 0.30, (DP, "olsr"): 0.10, ("secagg", "olsr"): 0.0,
        ("none", "random-3"): 0.0, (DP, "random-3"): 0.0, ("secagg", "random-3"): 0.0}
LEAK_SD = 0.04
NDCG_MEAN = {"none": 0.71, DP: 0.69, "secagg": 0.71}
AUDIT_TRIALS = {"none": 10000, DP: 1000, "secagg": 1000}  # per input; half evaluates


def _per_list(rng, key, click, defense, attack) -> pd.DataFrame:
    """One run's probed lists of one attack: counts (tp ~ Binomial(3, F1 mean), fp = fn = 3 - tp,
    so precision = recall = F1 = tp / 3) and scores (AUC real = counterfactual + leakage)."""
    tp = rng.binomial(3, F1_MEAN[defense, attack], size=LISTS)
    auc_cf = np.clip(0.6 + rng.normal(0, 0.08, LISTS), 0, 1)
    auc = auc_cf + LEAK[defense, attack] + rng.normal(0, LEAK_SD, LISTS)
    adv_cf = 0.1 + rng.normal(0, 0.05, LISTS)
    adv = adv_cf + 0.5 * LEAK[defense, attack] + rng.normal(0, LEAK_SD, LISTS)
    auc[0] = auc_cf[0] = np.nan  # a list without a non-click: AUC undefined
    return pd.DataFrame(dict(run_key=key, click_model=click, defense=defense, attack=attack,
                             client=np.arange(LISTS), query=2 * np.arange(LISTS), n_shown=10, n_clicked=3,
                             tp=tp, fp=3 - tp, tn=4 + tp, fn=3 - tp, precision=tp / 3, recall=tp / 3,
                             auc=auc, auc_counterfactual=auc_cf, advantage=adv, advantage_counterfactual=adv_cf))


def _binormal_roc(auc: float, fpr: np.ndarray) -> np.ndarray:
    """TPR of the equal-variance binormal ROC with area ``auc`` (d' = sqrt(2) Phi^-1(AUC))."""
    return stats.norm.cdf(stats.norm.ppf(fpr) + np.sqrt(2) * stats.norm.ppf(np.clip(auc, 1e-6, 1 - 1e-6)))


def _audit(rng, key, defense) -> dict:
    """One epsilon audit: error counts of a test with true rates (FPR, FNR) on halves of n."""
    n = AUDIT_TRIALS[defense] // 2
    fpr, fnr, claimed, scope, audited = {"none": (0.0, 0.0, np.inf, "none", "message"),
                                         DP: (0.2, 0.3, 4.5, "per round, per client message", "message"),
                                         "secagg": (0.4, 0.4, np.inf, "aggregate", "aggregate")}[defense]
    fp, fn = int(rng.binomial(n, fpr)), int(rng.binomial(n, fnr))
    u0 = stats.beta.ppf(0.975, fp + 1, n - fp)
    u1 = stats.beta.ppf(0.975, fn + 1, n - fn)
    lb = max(0.0, np.log((1 - u0) / u1), np.log((1 - u1) / u0))
    return dict(run_key=key, algo="fpdgd", defense=defense, mechanism="laplace" if defense == DP else defense,
                attack="distinguisher", threat_model="server (aggregate only)" if defense == "secagg" else "server",
                neighbours="natural", test="projection", claimed_epsilon=claimed, claimed_delta=0.0,
                claimed_scope=scope, audited_scope=audited,
                epsilon_point=np.log(max(1 - fp / n, 1e-300) / max(fn / n, 1e-300)), epsilon_lb=lb,
                confidence=0.95, n_trials=2 * n, fpr=fp / n, fnr=fn / n, fp=fp, fn=fn, n0=n, n1=n,
                ceiling=np.log((1 - (1 - 0.025 ** (1 / n))) / (1 - 0.025 ** (1 / n))),
                trial_limited=fp == 0 and fn == 0, mu=np.nan, mu_lb=np.nan, rounds=1,
                claim_verdict="no claim" if np.isinf(claimed) else "consistent",
                tightness=lb / claimed if np.isfinite(claimed) else np.nan)


def synthetic_runs(rounds: int = 4, doc_id: str = "q1-d7") -> list[dict]:
    """One dict per run (click model x seed x fold): run_key, config, seed and its tables."""
    runs = []
    grid = np.linspace(0.0005, 1.0, 60)
    for c, click in enumerate(CLICK_MODELS):
        for seed in SEEDS:
            for fold in FOLDS:
                rng = np.random.default_rng([c, seed, fold])
                key = f"run-{click}-{seed}-{fold}"
                base = dict(algo="fpdgd", data="mq2008", fold=fold, seed=seed, click_model=click)
                attacks, utility, curves, per_query, audits, roc = [], [], [], [], [], []
                for defense in DEFENSES:
                    threat = "server (aggregate only)" if defense == "secagg" else "server"
                    for attack in ATTACKS:
                        lists = _per_list(rng, key, click, defense, attack)
                        per_query.append(lists)
                        auc, auc_cf = lists["auc"].mean(), lists["auc_counterfactual"].mean()
                        for averaging in ("macro", "micro"):
                            f1 = F1_MEAN[defense, attack] + rng.normal(0, 0.03)
                            attacks.append(dict(
                                run_key=key, **base, defense=defense, threat_model=threat,
                                attack=attack, averaging=averaging, reference=REFERENCE[attack],
                                accuracy=0.6 + rng.normal(0, 0.02), precision=f1 + rng.normal(0, 0.02),
                                recall=f1 + rng.normal(0, 0.02), f1=f1, auc=auc, auc_counterfactual=auc_cf,
                                leakage=auc - auc_cf, leakage_normalized=(auc - auc_cf) / (1 - auc_cf),
                                advantage=lists["advantage"].mean(),
                                advantage_counterfactual=lists["advantage_counterfactual"].mean(),
                                tpr_at_fpr_0_01=float(_binormal_roc(auc, np.array([0.01]))[0]),
                                tpr_at_fpr_0_001=np.nan, n_counterfactual=20,
                                n_queries=LISTS, probe_cohort=1, zero_division="0"))
                        for curve, area in (("real", auc), ("counterfactual", auc_cf)):
                            roc.append(pd.DataFrame(dict(run_key=key, click_model=click, defense=defense,
                                                         threat_model=threat, attack=attack, curve=curve,
                                                         fpr=grid, tpr=_binormal_roc(area, grid))))
                    ndcg = NDCG_MEAN[defense] + rng.normal(0, 0.01)
                    utility.append(dict(run_key=key, **base, defense=defense, ndcg10=ndcg,
                                        expected_maxrr=0.4 + rng.normal(0, 0.01)))
                    for r in range(1, rounds + 1):
                        curves.append(dict(
                            run_key=key, defense=defense, round=r,
                            offline_ndcg10=(ndcg - 0.1 / r) if r % 2 == 0 else np.nan,
                            online_ndcg=0.5 + 0.01 * r, shown_ndcg=0.55 + 0.01 * r,
                            mean_update_norm=1.0 / r))
                    audits.append(_audit(rng, key, defense))
                utility = pd.DataFrame(utility)
                none_ndcg = utility.loc[utility["defense"] == "none", "ndcg10"].iloc[0]
                utility.insert(utility.columns.get_loc("ndcg10") + 1, "ndcg10_delta",
                               utility["ndcg10"] - none_ndcg)
                attacked = utility.assign(poison="lie(fraction=0.2)", ndcg10=utility["ndcg10"] - 0.2)  # integrity runs
                utility = pd.concat([utility, attacked.assign(ndcg10_delta=attacked["ndcg10"] - none_ndcg)],
                                    ignore_index=True)
                tables = {"attacks": pd.DataFrame(attacks), "utility": utility,
                          "curves": pd.DataFrame(curves), "per_query": pd.concat(per_query, ignore_index=True),
                          "audits": pd.DataFrame(audits)}
                if c == 0 and seed == SEEDS[0] and fold == FOLDS[0]:
                    tables["epsilon"] = epsilon_table(key, doc_id)
                config = dict(base, campaign="synthetic", rounds=rounds, doc=doc_id)
                # ROC points (the table the report asks the engine for; the store has no such table yet)
                runs.append(dict(run_key=key, config=config, seed=seed, tables=tables,
                                 roc=pd.concat(roc, ignore_index=True)))
    return runs


def epsilon_table(run_key: str, note: str) -> pd.DataFrame:
    rows = []
    for click in CLICK_MODELS:
        for p in (0.5, 0.7, 0.9):
            eps = (1.0 if click == "perfect" else 0.6) * np.log(p / (1 - p)) * 3
            rows.append(dict(run_key=run_key, click_model=click, levels=3, length=10, p=p,
                             epsilon=eps, theoretical=np.log(p / (1 - p)) * 3, note=note))
    return pd.DataFrame(rows)


def run_audit_rows() -> pd.DataFrame:
    """Two audit-run rows of one defense (10 and 100 rounds), as the run_audits table holds them."""
    base = {"algorithm": "fpdgd", "defense": DP, "scope": "message", "canaries": 1000, "runs": 100,
            "sampling_rate": 0.1, "delta": 0.0, "guesses": 200, "correct": 190, "canary_limit": 4.6,
            "limited_by_canaries": False, "estimate_low": 1.0, "estimate_high": 3.0, "multi_fp": 10, "multi_fn": 12,
            "multi_n": 50, "canary_participations_max": 3, "epsilon_server_q99": 8.0, "claimed_epsilon": 4.5,
            "claimed_scope": "message", "tightness": 0.1, "ndcg10": 0.7, "seconds": 3.0}
    return pd.DataFrame([{**base, "rounds": r, "epsilon_lb": lb, "epsilon_estimate": 2.0, "epsilon_lb_multi": 1.5,
                          "epsilon_accounted_canaries": acc, "epsilon_server": acc, "epsilon_observer": 1.2,
                          "claim_verdict": v, "limited_by_canaries": r == 10}
                         for r, lb, acc, v in ((10, 2.5, 4.5, "consistent"), (100, 3.0, 40.0, "untestable"))])


def synthetic_tables(**kwargs) -> dict[str, pd.DataFrame]:
    """All runs' tables concatenated, plus a ``runs`` table, as ``store.load`` returns them."""
    runs = synthetic_runs(**kwargs)
    names = ("curves", "attacks", "per_query", "audits", "utility", "epsilon")
    out = {n: pd.concat([r["tables"][n] for r in runs if n in r["tables"]], ignore_index=True)
           for n in names}
    out["roc"] = pd.concat([r["roc"] for r in runs], ignore_index=True)
    out["runs"] = pd.DataFrame([dict(run_key=r["run_key"], campaign="synthetic", status="done",
                                     config="{}", env='{"numpy": "2.0"}', seed=r["seed"],
                                     seconds=1.0, finished_at="2026-01-01T00:00:00+00:00",
                                     error=None) for r in runs])
    out["run_audits"] = run_audit_rows()
    return out
