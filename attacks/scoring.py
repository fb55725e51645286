"""Scoring a ``Guess`` against the ``GroundTruth`` clicks (contracts.md, Attack scoring).

Per query (one shown list of one client): confusion counts over the shown documents,
accuracy, precision, recall, F1 and the AUC of the scores (the Mann-Whitney statistic, equal
to ``sklearn.metrics.roc_auc_score`` on the list, vectorized over lists). Summaries average them over
queries (``macro``, as Pham) and pool the counts (``micro``).

Zero-division policy ``"0"`` (the default, as ``sklearn.metrics`` with ``zero_division=0``):
a query with no positive guess has precision 0, a query with no click has recall 0, and F1
is 0 when precision + recall is 0. Policy ``"skip"`` leaves such queries out of the macro
mean of the undefined metric instead (the published attack code averages precision only over
queries with at least one guess). AUC is defined only for lists with both clicked and
unclicked documents (NaN otherwise) and the macro AUC is the mean over those.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fltr_audit.errors import FltrError
from fltr_audit.messages import Guess, RoundBatch

ZERO_DIVISION = ("0", "skip")


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, 0 where den is 0 (the zero-division policy)."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den > 0)


def _auc_per_row(score: np.ndarray, truth: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mann-Whitney AUC of each row (ties count 1/2), NaN without both classes."""
    pos = truth & mask
    neg = ~truth & mask
    s = np.where(mask, score, 0.0)
    gt = (s[:, :, None] > s[:, None, :]) & pos[:, :, None] & neg[:, None, :]
    eq = (s[:, :, None] == s[:, None, :]) & pos[:, :, None] & neg[:, None, :]
    pairs = pos.sum(1) * neg.sum(1)
    wins = gt.sum(axis=(1, 2)) + 0.5 * eq.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, wins / pairs, np.nan)


def score_guess(guess: Guess, batch: RoundBatch, *, min_shown: int = 0, require_click: bool = False) -> pd.DataFrame:
    """One row per (client, query slot) with at least ``min_shown`` shown documents (and a
    click when ``require_click``; Pham's evaluation keeps lists of 10 with a click).

    Columns: client, query, n_shown, n_clicked, n_guessed, tp, fp, tn, fn, accuracy,
    precision, recall, f1, auc.
    """
    clicks = np.asarray(batch.truth.clicks, dtype=bool)
    if guess.decision.shape != clicks.shape:
        raise FltrError(f"attack {guess.attack}: guess shape {guess.decision.shape} != clicks shape {clicks.shape}")
    view = batch.view
    mask = view.interactions.mask if view.interactions is not None else ~np.isnan(guess.score)
    n, B, k = clicks.shape
    d = guess.decision & mask
    c = clicks & mask
    tp = (d & c).sum(-1)
    fp = (d & ~c).sum(-1)
    fn = (~d & c).sum(-1)
    n_shown = mask.sum(-1)
    tn = n_shown - tp - fp - fn
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    f1 = _ratio(2 * precision * recall, precision + recall)
    auc = _auc_per_row(guess.score.reshape(n * B, k), c.reshape(n * B, k), mask.reshape(n * B, k)).reshape(n, B)
    queries = view.interactions.queries if view.interactions is not None else np.full((n, B), -1)
    frame = pd.DataFrame(
        {
            "client": np.repeat(np.asarray(batch.truth.client_ids), B),
            "query": np.asarray(queries).reshape(-1),
            "n_shown": n_shown.reshape(-1),
            "n_clicked": c.sum(-1).reshape(-1),
            "n_guessed": d.sum(-1).reshape(-1),
            "tp": tp.reshape(-1),
            "fp": fp.reshape(-1),
            "tn": tn.reshape(-1),
            "fn": fn.reshape(-1),
            "accuracy": _ratio(tp + tn, n_shown).reshape(-1),
            "precision": precision.reshape(-1),
            "recall": recall.reshape(-1),
            "f1": f1.reshape(-1),
            "auc": auc.reshape(-1),
        }
    )
    keep = (frame["n_shown"] >= max(min_shown, 1)) & ((frame["n_clicked"] > 0) | (not require_click))
    return frame[keep].reset_index(drop=True)


def summarize(per_query: pd.DataFrame, zero_division: str = "0") -> list[dict]:
    """Two rows, ``averaging`` = "macro" (mean over queries) and "micro" (pooled counts).

    Each row: averaging, accuracy, precision, recall, f1, auc, n_queries, zero_division.
    The micro AUC pools the (clicked, unclicked) pairs *within* lists over all queries:
    ``sum_q auc_q pairs_q / sum_q pairs_q`` with ``pairs_q = n_clicked (n_shown - n_clicked)``
    (scores of different lists are not compared); NaN when no list has both classes.
    """
    if zero_division not in ZERO_DIVISION:
        raise FltrError(f"zero_division must be one of {', '.join(ZERO_DIVISION)}, got {zero_division!r}")
    q = per_query
    n_queries = int(len(q))
    if zero_division == "skip":
        prec = q.loc[q["tp"] + q["fp"] > 0, "precision"]
        rec = q.loc[q["tp"] + q["fn"] > 0, "recall"]
        f1 = q.loc[(q["tp"] + q["fp"] > 0) & (q["tp"] + q["fn"] > 0), "f1"]
    else:
        prec, rec, f1 = q["precision"], q["recall"], q["f1"]
    nan = float("nan")
    macro = {
        "averaging": "macro",
        "accuracy": float(q["accuracy"].mean()) if n_queries else nan,
        "precision": float(prec.mean()) if len(prec) else nan,
        "recall": float(rec.mean()) if len(rec) else nan,
        "f1": float(f1.mean()) if len(f1) else nan,
        "auc": float(q["auc"].mean()) if q["auc"].notna().any() else nan,
        "n_queries": n_queries,
        "zero_division": zero_division,
    }
    tp, fp, tn, fn = (int(q[c].sum()) for c in ("tp", "fp", "tn", "fn"))
    p = tp / (tp + fp) if tp + fp else (0.0 if zero_division == "0" else nan)
    r = tp / (tp + fn) if tp + fn else (0.0 if zero_division == "0" else nan)
    micro_f1 = 2 * p * r / (p + r) if (p + r) > 0 else (0.0 if zero_division == "0" else nan)
    micro = {
        "averaging": "micro",
        "accuracy": (tp + tn) / (tp + fp + tn + fn) if n_queries else nan,
        "precision": p,
        "recall": r,
        "f1": micro_f1,
        "auc": _pooled_auc(q),
        "n_queries": n_queries,
        "zero_division": zero_division,
    }
    return [macro, micro]


def _pooled_auc(q: pd.DataFrame) -> float:
    pairs = (q["n_clicked"] * (q["n_shown"] - q["n_clicked"])).to_numpy(dtype=float)
    defined = q["auc"].notna().to_numpy() & (pairs > 0)
    if not defined.any():
        return float("nan")
    return float((q["auc"].to_numpy()[defined] * pairs[defined]).sum() / pairs[defined].sum())
