"""Scoring a ``Guess`` against the ``GroundTruth`` clicks and against counterfactual clicks.

Per query (one shown list of one client): confusion counts over the shown documents,
accuracy, precision, recall, F1 (at the attack's own decisions), and two threshold-free
measures of the attack's scores:

* ``auc``: the AUC of the scores on the list (the Mann-Whitney statistic, ties count 1/2,
  equal to ``sklearn.metrics.roc_auc_score`` on the list), NaN unless the list has both a
  clicked and an unclicked document;
* ``advantage``: TPR - FPR of the decisions on the list (NaN without both classes).

**Counterfactual baseline.** Given K click vectors drawn from the same click model on the
same shown lists, from a stream independent of the real clicks (``Algorithm.redraw_clicks``),
the same scores and decisions are scored against each draw: ``auc_counterfactual`` and
``advantage_counterfactual`` are the means over the draws on which the measure is defined
(draws without both a click and a non-click on the list are skipped; NaN when none is
defined). An attack that does not read the user's message is scored on the real clicks
exactly as on a fresh draw, so ``auc - auc_counterfactual`` has expectation 0 whatever its
side knowledge or guess rate; a positive mean over lists is leakage of *this* user's clicks
(Jayaraman & Evans, CCS 2022: attribute inference must beat imputation from the population).

Summaries (``summarize``) give two rows. ``macro``: means over lists; ``leakage`` is the mean
over lists of the paired difference ``auc - auc_counterfactual`` (lists where both are
defined), ``advantage`` / ``advantage_counterfactual`` the means of the per-list values.
``micro``: pooled over every kept slot of every list; ``auc`` is ``roc_auc_score`` of all
slots at once, ``auc_counterfactual`` the mean over draws of the pooled AUC, ``leakage`` their
difference; ``advantage`` is the pooled TPR - FPR of the decisions. Both rows carry
``leakage_normalized = leakage / (1 - auc_counterfactual)`` (the share of the room above the
counterfactual that the attack takes) and the pooled ``tpr_at_fpr_0_01`` / ``tpr_at_fpr_0_001``:
the largest TPR on sklearn's ROC curve at FPR <= 1 % / 0.1 %, NaN when there are fewer than
1 / FPR unclicked slots (the curve cannot resolve that FPR) or no clicked one.

Zero-division policy ``"0"`` (the default, as ``sklearn.metrics`` with ``zero_division=0``):
a query with no positive guess has precision 0, a query with no click has recall 0, and F1
is 0 when precision + recall is 0. Policy ``"skip"`` leaves such queries out of the macro
mean of the undefined metric instead (the published attack code averages precision only over
queries with at least one guess).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import roc_auc_score, roc_curve

from fltr_audit.constraints import Options, ParameterError, check
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Guess, RoundBatch

ZERO_DIVISION = ("0", "skip")
FPR_TARGETS = {"tpr_at_fpr_0_01": 0.01, "tpr_at_fpr_0_001": 0.001}


@dataclass(frozen=True)
class Slots:
    """Every kept shown slot of a probe, flattened, for the pooled measures.

    Attributes
    ----------
    score : float64 (m,)
    click : bool (m,)
    decision : bool (m,)
    counterfactual : bool (K, m)
        The counterfactual clicks of the same slots (K = 0 without a baseline).
    """

    score: np.ndarray
    click: np.ndarray
    decision: np.ndarray
    counterfactual: np.ndarray

    @staticmethod
    def concat(parts: list["Slots"]) -> "Slots":
        """The slots of several rounds (all with the same K)."""
        if not parts:
            return Slots(np.empty(0), np.empty(0, bool), np.empty(0, bool), np.empty((0, 0), bool))
        return Slots(np.concatenate([p.score for p in parts]), np.concatenate([p.click for p in parts]),
                     np.concatenate([p.decision for p in parts]),
                     np.concatenate([p.counterfactual for p in parts], axis=1))


@dataclass(frozen=True)
class Evaluation:
    """One guess scored: the per-list rows (``columns``, one array per column) and the kept slots
    (for pooled measures)."""

    columns: dict[str, np.ndarray]
    slots: Slots

    @property
    def per_query(self) -> pd.DataFrame:
        """The per-list rows as a table."""
        return pd.DataFrame(self.columns)

    @staticmethod
    def rows(evaluations: list["Evaluation"]) -> pd.DataFrame:
        """The per-list rows of several evaluations in order, one table built once (as
        ``pd.concat`` of their ``per_query`` with a fresh index)."""
        if not evaluations:
            return pd.DataFrame()
        return pd.DataFrame({name: np.concatenate([e.columns[name] for e in evaluations])
                             for name in evaluations[0].columns})


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, 0 where den is 0 (the zero-division policy)."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den > 0)


def _nan_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.full(np.broadcast(num, den).shape, np.nan), where=den > 0)


def list_ranks(score: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Average rank (1-based, ties share the mean rank) of each valid slot within its row, (R, k)."""
    s = np.where(mask, score, 0.0)
    other = mask[:, None, :]
    less = ((s[:, None, :] < s[:, :, None]) & other).sum(-1)
    ties = ((s[:, None, :] == s[:, :, None]) & other).sum(-1)  # includes the slot itself
    return np.where(mask, less + (ties + 1) / 2.0, 0.0)


def auc_from_ranks(ranks: np.ndarray, clicks: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mann-Whitney AUC of each row for click vectors ``(..., R, k)`` sharing ``ranks (R, k)``.

    ``AUC = (sum of the clicked slots' ranks - P (P + 1) / 2) / (P N)``; NaN without both classes.
    """
    c = clicks & mask
    pos = c.sum(-1)
    neg = mask.sum(-1) - pos
    rank_sum = (c * ranks).sum(-1)
    return _nan_ratio(rank_sum - pos * (pos + 1) / 2.0, pos * neg)


def advantage_of(decision: np.ndarray, clicks: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """TPR - FPR of the decisions per row for click vectors ``(..., R, k)``; NaN without both classes."""
    c = clicks & mask
    d = decision & mask
    pos = c.sum(-1)
    neg = mask.sum(-1) - pos
    tpr = _nan_ratio((d & c).sum(-1), pos)
    fpr = _nan_ratio((d & ~c).sum(-1), neg)
    return tpr - fpr


def _nanmean_axis0(values: np.ndarray) -> np.ndarray:
    """Mean over the first axis ignoring NaN; NaN where every entry is NaN (no warning)."""
    defined = ~np.isnan(values)
    count = defined.sum(0)
    return _nan_ratio(np.where(defined, values, 0.0).sum(0), count)


def require_scores(guess: Guess, mask: np.ndarray) -> None:
    """FltrError naming the attack unless its score is finite on every shown slot."""
    score = np.asarray(guess.score, dtype=np.float64)
    if score.shape != mask.shape or not np.isfinite(score[mask]).all():
        raise ParameterError("attacks", f"{guess.attack}: outputs no scores (NaN, infinite or missing on shown documents); "
                                        "every attack must score every shown document (higher = more likely clicked)")


def evaluate(guess: Guess, batch: RoundBatch, *, counterfactual: np.ndarray | None = None, min_shown: int = 0,
             require_click: bool = False, score_malicious: bool = False) -> Evaluation:
    """Score one round's guess: per-list rows and the kept slots.

    Parameters
    ----------
    counterfactual : bool (K, n, B, k), optional
        K counterfactual click vectors of the same shown lists.
    min_shown, require_click
        Keep lists with at least ``min_shown`` shown documents (and a real click when
        ``require_click``; Pham's evaluation keeps lists of 10 with a click).
    score_malicious
        Also score the lists of clients the round's ground truth marks malicious
        (``private["malicious"]``, poisoning; ``fltr_audit.engine.poisoning``): left out by default,
        they are no victims of the privacy attacks.

    The per-list columns: client, query, n_shown, n_clicked, n_guessed, tp, fp, tn, fn,
    accuracy, precision, recall, f1, auc, advantage, auc_counterfactual, advantage_counterfactual.
    """
    clicks = np.asarray(batch.truth.clicks, dtype=bool)
    if guess.decision.shape != clicks.shape:
        raise FltrError(f"attack {guess.attack}: guess shape {guess.decision.shape} != clicks shape {clicks.shape}")
    view = batch.view
    mask = view.interactions.mask if view.interactions is not None else ~np.isnan(guess.score)
    require_scores(guess, mask)
    n, B, k = clicks.shape
    R = n * B
    cf = np.zeros((0, n, B, k), dtype=bool) if counterfactual is None else np.asarray(counterfactual, dtype=bool)
    if cf.shape[1:] != clicks.shape:
        raise FltrError(f"attack {guess.attack}: counterfactual shape {cf.shape} does not match clicks {clicks.shape}")
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
    flat_mask = mask.reshape(R, k)
    score = np.where(mask, guess.score, 0.0).reshape(R, k)
    ranks = list_ranks(score, flat_mask)
    flat_d = d.reshape(R, k)
    auc = auc_from_ranks(ranks, c.reshape(R, k), flat_mask)
    advantage = advantage_of(flat_d, c.reshape(R, k), flat_mask)
    cf_flat = cf.reshape(len(cf), R, k) & flat_mask
    auc_cf = _nanmean_axis0(auc_from_ranks(ranks, cf_flat, flat_mask)) if len(cf) else np.full(R, np.nan)
    adv_cf = _nanmean_axis0(advantage_of(flat_d, cf_flat, flat_mask)) if len(cf) else np.full(R, np.nan)
    queries = view.interactions.queries if view.interactions is not None else np.full((n, B), -1)
    columns = {
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
        "auc": auc,
        "advantage": advantage,
        "auc_counterfactual": auc_cf,
        "advantage_counterfactual": adv_cf,
    }
    keep = (columns["n_shown"] >= max(min_shown, 1)) & ((columns["n_clicked"] > 0) | (not require_click))
    malicious = batch.truth.private.get("malicious")
    if malicious is not None and not score_malicious:
        keep = keep & np.repeat(~np.asarray(malicious, dtype=bool), B)
    slot_keep = flat_mask & keep[:, None]
    slots = Slots(score=score[slot_keep], click=c.reshape(R, k)[slot_keep], decision=flat_d[slot_keep],
                  counterfactual=cf_flat[:, slot_keep])
    return Evaluation({name: values[keep] for name, values in columns.items()}, slots)


def score_guess(guess: Guess, batch: RoundBatch, *, counterfactual: np.ndarray | None = None, min_shown: int = 0,
                require_click: bool = False) -> pd.DataFrame:
    """The per-list rows of ``evaluate`` (one row per kept (client, query slot))."""
    return evaluate(guess, batch, counterfactual=counterfactual, min_shown=min_shown,
                    require_click=require_click).per_query


def tpr_at_fpr(click: np.ndarray, score: np.ndarray, target: float) -> float:
    """Largest TPR of ``roc_curve`` at FPR <= ``target``; NaN with fewer than 1 / target
    negatives (the curve cannot resolve that FPR) or without positives."""
    click = np.asarray(click, dtype=bool)
    negatives, positives = int((~click).sum()), int(click.sum())
    if positives == 0 or negatives * target < 1.0 - 1e-9:
        return float("nan")
    fpr, tpr, _ = roc_curve(click, score)
    return float(tpr[np.searchsorted(fpr, target, side="right") - 1])


def pooled_auc(score: np.ndarray, clicks: np.ndarray) -> np.ndarray:
    """AUC of all slots at once for click vectors ``(..., m)`` sharing ``score (m,)`` (NaN
    without both classes); equal to ``roc_auc_score(clicks[i], score)`` for each vector."""
    ranks = stats.rankdata(score)
    pos = clicks.sum(-1).astype(np.float64)
    neg = clicks.shape[-1] - pos
    return _nan_ratio(clicks.astype(np.float64) @ ranks - pos * (pos + 1) / 2.0, pos * neg)


def _pooled_advantage(decision: np.ndarray, clicks: np.ndarray) -> np.ndarray:
    pos = clicks.sum(-1)
    neg = clicks.shape[-1] - pos
    return _nan_ratio((decision & clicks).sum(-1), pos) - _nan_ratio((decision & ~clicks).sum(-1), neg)


def _mean(values: pd.Series | np.ndarray) -> float:
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else float("nan")


def _normalized(leakage: float, auc_cf: float) -> float:
    room = 1.0 - auc_cf
    return leakage / room if np.isfinite(room) and room > 0 else float("nan")


def summarize(per_query: pd.DataFrame, zero_division: str = "0", slots: Slots | None = None) -> list[dict]:
    """Two rows, ``averaging`` = "macro" (mean over queries) and "micro" (pooled).

    Each row: averaging, accuracy, precision, recall, f1, auc, auc_counterfactual, leakage,
    leakage_normalized, advantage, advantage_counterfactual, tpr_at_fpr_0_01,
    tpr_at_fpr_0_001, n_counterfactual, n_queries, zero_division (see the module docstring).
    The pooled measures need ``slots`` (NaN without them).
    """
    check("zero_division", zero_division, (Options(ZERO_DIVISION),))
    q = per_query
    n_queries = int(len(q))
    if zero_division == "skip":
        prec = q.loc[q["tp"] + q["fp"] > 0, "precision"]
        rec = q.loc[q["tp"] + q["fn"] > 0, "recall"]
        f1 = q.loc[(q["tp"] + q["fp"] > 0) & (q["tp"] + q["fn"] > 0), "f1"]
    else:
        prec, rec, f1 = q["precision"], q["recall"], q["f1"]
    nan = float("nan")
    n_cf = 0 if slots is None else int(len(slots.counterfactual))
    pooled = _pooled_measures(slots)
    paired = (q["auc"] - q["auc_counterfactual"]) if n_queries else pd.Series(dtype=float)
    auc_cf = _mean(q["auc_counterfactual"]) if n_queries else nan
    leakage = _mean(paired)
    macro = {
        "averaging": "macro",
        "accuracy": float(q["accuracy"].mean()) if n_queries else nan,
        "precision": float(prec.mean()) if len(prec) else nan,
        "recall": float(rec.mean()) if len(rec) else nan,
        "f1": float(f1.mean()) if len(f1) else nan,
        "auc": _mean(q["auc"]) if n_queries else nan,
        "auc_counterfactual": auc_cf,
        "leakage": leakage,
        "leakage_normalized": _normalized(leakage, auc_cf),
        "advantage": _mean(q["advantage"]) if n_queries else nan,
        "advantage_counterfactual": _mean(q["advantage_counterfactual"]) if n_queries else nan,
        **{key: pooled[key] for key in FPR_TARGETS},
        "n_counterfactual": n_cf,
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
        **{key: pooled[key] for key in ("auc", "auc_counterfactual", "leakage", "leakage_normalized", "advantage",
                                        "advantage_counterfactual", *FPR_TARGETS)},
        "n_counterfactual": n_cf,
        "n_queries": n_queries,
        "zero_division": zero_division,
    }
    return [macro, micro]


def _pooled_measures(slots: Slots | None) -> dict:
    """The pooled (micro) threshold-free measures of ``slots`` (NaN without them)."""
    nan = float("nan")
    keys = ("auc", "auc_counterfactual", "leakage", "leakage_normalized", "advantage", "advantage_counterfactual",
            *FPR_TARGETS)
    if slots is None or len(slots.score) == 0:
        return dict.fromkeys(keys, nan)
    click, score = slots.click, slots.score
    both = 0 < click.sum() < len(click)
    auc = float(roc_auc_score(click, score)) if both else nan
    cf = slots.counterfactual
    auc_cf = _mean(pooled_auc(score, cf)) if len(cf) else nan
    leakage = auc - auc_cf
    return {
        "auc": auc,
        "auc_counterfactual": auc_cf,
        "leakage": leakage,
        "leakage_normalized": _normalized(leakage, auc_cf),
        "advantage": float(_pooled_advantage(slots.decision, click)),
        "advantage_counterfactual": _mean(_pooled_advantage(slots.decision, cf)) if len(cf) else nan,
        **{key: tpr_at_fpr(click, score, fpr) for key, fpr in FPR_TARGETS.items()},
    }


def leakage_interval(per_query: pd.DataFrame, measure: str = "auc", confidence: float = 0.95) -> dict:
    """Mean of the per-list paired difference ``measure - measure_counterfactual`` with a
    two-sided Student-t interval over lists, and the one-sided p-value of "no leakage".

    Returns a dict: leakage, low, high, p_value, n_lists (lists where both are defined).
    """
    diff = (per_query[measure] - per_query[f"{measure}_counterfactual"]).to_numpy(dtype=np.float64)
    diff = diff[~np.isnan(diff)]
    n = len(diff)
    if n < 2:
        mean = float(diff.mean()) if n else float("nan")
        return {"leakage": mean, "low": float("nan"), "high": float("nan"), "p_value": float("nan"), "n_lists": n}
    mean, se = float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(n))
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * se
    p = float(stats.t.sf(mean / se, n - 1)) if se > 0 else (0.0 if mean > 0 else 1.0)
    return {"leakage": mean, "low": mean - half, "high": mean + half, "p_value": p, "n_lists": n}
