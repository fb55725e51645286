"""Reference attacks that never read the client's message: ``guess-all`` and ``prior``.

Why they exist. An attribute-inference attack is only evidence of leakage when it beats
what could be imputed about the user from the population alone (Jayaraman & Evans, "Are
Attribute Inference Attacks Just Imputation?", CCS 2022). Clicks follow relevance, which the
server's global model partly knows, and position, which the server sees; an attack's F1 or
AUC therefore says little by itself. These two attacks are as informed as the server is
without the message, and the counterfactual baseline (``attacks.scoring``) must find zero
leakage for them, whatever their F1 (a control of the baseline, not a threat).

* ``guess-all``: every shown document is guessed clicked, with one constant score (AUC 0.5,
  advantage 0 on every list: honest, it ranks nothing).
* ``prior``: the global model's score and the list position only. The score of the slot at
  0-based position ``i`` whose document has 0-based rank ``r`` under the global model within
  the shown list is ``1 / log2(i + 2) + 1 / log2(r + 2)``: the DCG weight of where it was shown
  (examination falls with position) plus the DCG weight of where the global model ranks it
  (a population estimate of its relevance). Decisions: the ``m`` top-scored slots of each
  list (default 1: the server does not know the click model's click rate, and most clicked
  lists have one click under the navigational model).
"""

from __future__ import annotations

import numpy as np

from attacks.view import require_shown, shown_features
from fltr_audit.constraints import Interval, check
from fltr_audit.engine.messages import Guess, ServerView


def dcg_weight(rank: np.ndarray) -> np.ndarray:
    """``1 / log2(rank + 2)`` of 0-based ranks."""
    return 1.0 / np.log2(np.asarray(rank, dtype=np.float64) + 2.0)


def rank_within(score: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """0-based rank of each valid slot by descending ``score`` within its list (stable)."""
    order = np.argsort(np.where(mask, -score, np.inf), axis=-1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(mask.shape[-1]), axis=-1)
    return ranks


class GuessAll:
    """``guess-all``: every shown slot guessed clicked, score 0 everywhere."""

    name = "guess-all"

    def guess(self, view: ServerView) -> Guess:
        require_shown(view, self.name)
        mask = view.interactions.mask
        return Guess(attack=self.name, score=np.where(mask, 0.0, np.nan), decision=mask.copy())


class Prior:
    """``prior``: position and global-model rank only (see the module docstring)."""

    name = "prior"

    def __init__(self, m: int = 1):
        check("m", m, (Interval(int, 1, None),))
        self.m = int(m)

    def guess(self, view: ServerView) -> Guess:
        require_shown(view, self.name)
        X, mask = shown_features(view)
        global_score = np.asarray(view.ranker.score(view.global_params, X), dtype=np.float64)
        position = np.broadcast_to(np.arange(mask.shape[-1]), mask.shape)
        score = dcg_weight(position) + dcg_weight(rank_within(global_score, mask))
        decision = (rank_within(score, mask) < self.m) & mask
        return Guess(attack=self.name, score=np.where(mask, score, np.nan), decision=decision)
