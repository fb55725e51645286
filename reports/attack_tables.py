"""The attack rows of runs as summary tables: Pham's Table 4 shape per attack x click model x
defense (``attack_table``), and what a malicious server's manipulation costs the other members
(``manipulation_table``)."""

from __future__ import annotations

import pandas as pd

TABLE_COLUMNS = ["attack", "click_model", "defense", "threat_model", "accuracy", "precision", "recall", "f1",
                 "n_queries"]
SCORE_COLUMNS = ["reference", "auc", "auc_counterfactual", "leakage", "leakage_normalized", "advantage",
                 "advantage_counterfactual", "tpr_at_fpr_0_01", "tpr_at_fpr_0_001"]  # where the rows have them


def attack_table(tables: dict[str, pd.DataFrame], averaging: str = "macro") -> pd.DataFrame:
    """Pham's Table 4 shape extended by a defense column and the threshold-free scores: one row
    per attack x click model x defense, means over seeds and folds (``n_queries`` summed)."""
    attacks = tables["attacks"]
    rows = attacks[attacks["averaging"] == averaging]
    if "accuracy" not in rows.columns:  # only probes that formed no cohort (n_queries 0): nothing was scored
        return pd.DataFrame(columns=TABLE_COLUMNS)
    rows = rows.dropna(subset=["accuracy"])
    group = ["attack", "click_model", "defense", "threat_model"]
    grouped = rows.groupby(group, sort=False)
    scores = [c for c in SCORE_COLUMNS if c in rows.columns and c != "reference"]
    table = grouped[["accuracy", "precision", "recall", "f1", *scores]].mean()
    table["n_queries"] = grouped["n_queries"].sum().astype(int)  # over seeds and folds
    if "reference" in rows.columns:
        table["reference"] = grouped["reference"].any()
    extra = []
    if "n_counterfactual" in rows.columns:
        table["n_counterfactual"] = grouped["n_counterfactual"].first()
        extra.append("n_counterfactual")
    return table.reset_index()[TABLE_COLUMNS + [c for c in SCORE_COLUMNS if c in table.columns or c in group] + extra]


def manipulation_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per click model x defense x manipulation of ``server-malicious`` runs: the other
    members' nDCG@10 served honestly and manipulated, and the difference (empty otherwise)."""
    attacks = tables["attacks"]
    if "manipulation" not in attacks or attacks["manipulation"].isna().all():
        return pd.DataFrame()
    rows = attacks.dropna(subset=["manipulation"])
    cols = ["others_ndcg_honest", "others_ndcg_served", "others_ndcg_cost"]
    return rows.groupby(["click_model", "defense", "manipulation"], sort=False)[cols].mean().reset_index()
