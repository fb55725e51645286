"""Random-k baselines (Pham Table 4, "Random 3" / "Random 4"): guess k shown documents of
every list uniformly at random (all of them when the list is shorter than k)."""

from __future__ import annotations

import numpy as np

from attacks.view import require_shown
from fltr_audit.constraints import Interval, check
from fltr_audit.engine.messages import Guess, ServerView
from fltr_audit.engine.randomness import stream


class RandomK:
    """Guess ``k`` uniformly chosen shown slots per list; the score is the uniform key.

    Randomness: ``stream(seed, "attack-random", k, view.round)``, so a round's guess does not
    depend on which other rounds or attacks ran before it.
    """

    def __init__(self, k: int = 3, seed: int = 0):
        check("k", k, (Interval(int, 1, None),))
        check("seed", seed, (Interval(int, 0, None),))
        self.k, self.seed = int(k), int(seed)
        self.name = f"random{self.k}"

    def guess(self, view: ServerView) -> Guess:
        require_shown(view, self.name)
        mask = view.interactions.mask
        rng = stream(self.seed, "attack-random", self.k, int(view.round))
        keys = rng.random(mask.shape)
        # rank of each valid slot's key within its list (0 = largest); empty slots rank last
        order = np.argsort(np.where(mask, -keys, np.inf), axis=-1, kind="stable")
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.arange(mask.shape[-1]), axis=-1)
        decision = (ranks < self.k) & mask
        return Guess(attack=self.name, score=np.where(mask, keys, np.nan), decision=decision)
