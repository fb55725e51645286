"""The Bayes attacks' prior over a shown list's click vectors (``prior=``).

* ``"click-model"`` (default): the click model's exact probability of each click vector on
  the shown list (``cascade_log_prior``), which needs the relevance labels of the shown
  documents -- the testbed's server owns the documents and their judgments and the click
  model is public (the same assumption as ``seed-replay``). Vectors the cascade makes
  impossible (a click on an empty slot, or on a label with click probability 0) get 0.
* ``"uniform"``: every click vector on the shown slots equally likely (no labels used).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fltr_audit.constraints import ParameterError

PRIORS = ("click-model", "uniform")


def click_vectors(k: int) -> np.ndarray:
    """All 2^k click vectors, bool (2^k, k); vector j clicks position i when bit i of j is set."""
    return (np.arange(2**k)[:, None] >> np.arange(k)) & 1 == 1


def cascade_log_prior(click_prob: np.ndarray, stop_prob: np.ndarray, labels: np.ndarray,
                      vectors: np.ndarray) -> np.ndarray:
    """``log P(c)`` of every click vector under the CCM, shape (..., C) for labels (..., k).

    With L the last click of c, the user clicked and went on at every click above L, skipped
    every unclicked position above L, clicked L and then stopped or went on without a click:
    ``P(c) = prod_{i<L} [c_i (1 - s_i) | 1 - c_i] * c_L * (s_L + (1 - s_L) prod_{j>L} (1 - c_j))``;
    without a click ``prod_j (1 - c_j)``. So ``log P`` is a sum of per-position terms picked by
    fixed indicator matrices of the candidates: three GEMMs. Empty slots (label -1) are never
    clicked; impossible vectors get -inf.
    """
    labels = np.asarray(labels)
    empty = labels < 0
    lab = np.where(empty, 0, labels)
    c = np.where(empty, 0.0, np.asarray(click_prob)[lab])
    s = np.where(empty, 0.0, np.asarray(stop_prob)[lab])
    k = labels.shape[-1]
    tail = np.ones(labels.shape[:-1] + (k + 1,))                          # prod_{j >= m} (1 - c_j)
    for m in range(k - 1, -1, -1):
        tail[..., m] = tail[..., m + 1] * (1.0 - c[..., m])
    with np.errstate(divide="ignore"):
        go_on = np.log(c) + np.log1p(-s)
        skip = np.log1p(-c)
        end = np.log(c) + np.log(s + (1.0 - s) * tail[..., 1:])
    big = -1e30                                                           # log 0 that GEMMs can carry
    go_on, skip, end = (np.maximum(x, big) for x in (go_on, skip, end))
    any_click = vectors.any(-1)
    last = np.where(any_click, k - 1 - np.argmax(vectors[:, ::-1], axis=-1), k)
    above = np.arange(k)[None, :] < last[:, None]
    out = (go_on @ (vectors & above).T.astype(np.float64) + skip @ (~vectors & above).T.astype(np.float64)
           + end @ (np.arange(k)[None, :] == last[:, None]).T.astype(np.float64))
    return np.where(out < big / 2, -np.inf, out)


def log_prior(prior: str, click_model: Any, labels: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Log prior (..., C) of the candidate click vectors on lists with ``labels`` (..., k)."""
    if prior == "uniform":
        on_empty = (vectors[None, :, :] & (np.asarray(labels) < 0)[..., None, :]).any(-1)
        return np.where(on_empty, -np.inf, 0.0)
    if not hasattr(click_model, "stop_prob"):
        raise ParameterError("attacks", "bayes: the click-model prior needs a cascade click model "
                                        f"(got {getattr(click_model, 'name', click_model)!r}); use prior='uniform'")
    return cascade_log_prior(click_model.click_prob, click_model.stop_prob, labels, vectors)

