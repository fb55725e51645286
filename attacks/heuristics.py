"""Pham's heuristic click-guessing attacks (§4.1), aligned per document, and the
``as-published`` variants that reproduce the published attack code's misalignment.

With f' the model in the message (``global + update``) and f the global model, for every
document d of a shown list R:

* ``score``:    guess clicked when f'(d) > f(d)                        (score: f'(d) - f(d));
* ``prob``:     when softmax_R(f')(d) > softmax_R(f)(d)                (score: the difference);
* ``distance``: when #{d' in R, d' != d : f'(d) - f'(d') > f(d) - f(d')} > threshold
  (default 5, Pham's text)                                              (score: the count).

``distance``'s count is the within-list rank of ``score``'s change: f'(d) - f'(d') > f(d) - f(d')
is (f'(d) - f(d)) > (f'(d') - f(d')). Its scores therefore order every list exactly as ``score``'s
do, so its per-list AUC, TPR at any FPR and leakage are ``score``'s (only its decision rule,
count > threshold, differs). It stays available by name but is not in the default attack sets,
so that a verdict's family of attacks does not count one attack twice.

Under secure aggregation f' is the aggregate model (``global + aggregate update``), applied
to every shown list of the cohort.

``as-published`` (labelled as such; only to explain Pham's Table 4): the published code holds
f in the original (shown) order but f' in the order of the *new* ranking (the shown list
re-sorted by f'), and compares them position by position, so position i's decision compares
two different documents. Its distance rule counts with ``>=`` the threshold (``>= k / 2``,
5 for k = 10), so with distinct changes it guesses exactly 5 documents. The published code
ranks and normalizes over all candidate documents of the query; here, as everything in the
ServerView, over the shown list.
"""

from __future__ import annotations

import numpy as np

from attacks.view import client_updates, require_shown, shown_features
from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.engine.messages import Guess, ServerView

KINDS = ("score", "prob", "distance")


def _softmax(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax over the valid slots of the last axis (0 on empty slots)."""
    z = np.where(mask, s, -np.inf)
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _distance_count(new: np.ndarray, old: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """#{j valid, j != i : new_i - new_j > old_i - old_j} for every slot i, shape (..., k)."""
    k = new.shape[-1]
    higher = (new[..., :, None] - new[..., None, :]) > (old[..., :, None] - old[..., None, :])
    valid = mask[..., None, :] & ~np.eye(k, dtype=bool)
    return (higher & valid).sum(axis=-1)


def heuristic_scores(kind: str, new: np.ndarray, old: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The aligned score of each slot: change of score, of probability, or the distance count."""
    if kind == "score":
        return new - old
    if kind == "prob":
        return _softmax(new, mask) - _softmax(old, mask)
    return _distance_count(new, old, mask).astype(np.float64)


def misaligned(new: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The published code's f' vector: the new scores in the order of the new ranking
    (valid slots sorted by f' descending, empty slots last)."""
    order = np.argsort(np.where(mask, -new, np.inf), axis=-1, kind="stable")
    return np.take_along_axis(new, order, axis=-1)


class Heuristic:
    """One of Pham's heuristics.

    Parameters
    ----------
    kind : {"score", "prob", "distance"}
    threshold : int
        Distance-count threshold (``distance`` only): guess when count > threshold, or
        count >= threshold for the as-published variant.
    as_published : bool
        Reproduce the published code's misaligned comparison (see the module docstring).
    """

    def __init__(self, kind: str, threshold: int = 5, as_published: bool = False):
        if kind not in KINDS:
            raise ParameterError("attacks", f"unknown heuristic {kind!r} (choose from {', '.join(KINDS)})")
        check("threshold", threshold, (Interval(int, 0, None),))
        self.kind = kind
        self.threshold = int(threshold)
        self.as_published = bool(as_published)
        self.name = kind + ("-as-published" if as_published else "")

    def guess(self, view: ServerView) -> Guess:
        require_shown(view, self.name)
        updates, aggregate_update = client_updates(view, self.name)
        X, mask = shown_features(view)
        g = view.global_params
        new_params = g + (updates if updates is not None else aggregate_update)
        new = view.ranker.score(new_params, X)
        old = view.ranker.score(g, X)
        if self.as_published:
            new = misaligned(new, mask)
        score = heuristic_scores(self.kind, new, old, mask)
        if self.kind != "distance":
            decision = score > 0
        elif self.as_published:
            decision = score >= self.threshold
        else:
            decision = score > self.threshold
        return Guess(attack=self.name, score=np.where(mask, score, np.nan), decision=decision & mask)


def distance_heuristic(k: int = 10, threshold: int | None = None, as_published: bool = False) -> Heuristic:
    """Pham's distance count with threshold ``k // 2`` (5 for a 10-document list; FedIPS shows
    K = 5) unless ``threshold`` is given."""
    return Heuristic("distance", threshold=k // 2 if threshold is None else threshold, as_published=as_published)
