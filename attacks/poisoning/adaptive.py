"""``adaptive``: the aggregator-tailored model poisoning of Shejwalkar & Houmansadr (NDSS 2021,
"Manipulating the Byzantine", AGR-tailored attack, Eq. 2-3).

Every malicious client sends ``mu + gamma p``, mu the benign updates' mean and p a perturbation
direction: ``std`` (``-sigma``, the coordinate-wise std of the benign updates; their best on most
aggregators), ``unit`` (``-mu / ||mu||``, scaled by ``||mu||`` so that gamma counts means) or
``sign`` (``-sign(mu)``). gamma maximizes the deviation ``||AGR(crafted cohort) - mu||_2`` of what
the aggregator the attack faces releases (it calls the aggregator itself: full knowledge of the
aggregation rule and of the benign updates), over the grid ``max_gamma * 2^-j``, j < ``steps``
(their Algorithm 1 halves its step the same way). Against the plain mean the deviation grows with
gamma, so the attack sends ``max_gamma``; against Krum, the largest gamma Krum still selects.
"""

from __future__ import annotations

import numpy as np

from attacks.poisoning.crafting import Crafting, Oracle, benign_moments



def direction(U: np.ndarray, bad: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The benign mean and the perturbation direction ``p`` of ``kind`` (module docstring)."""
    mu, sigma = benign_moments(U, bad)
    if kind == "std":
        return mu, -sigma
    if kind == "sign":
        return mu, -np.sign(mu)
    return mu, -mu


class Adaptive(Crafting):
    def __init__(self, fraction: float, direction: str = "std", max_gamma: float = 10.0, steps: int = 20,
                 **common) -> None:
        super().__init__(fraction, **common)
        self.direction, self.max_gamma, self.steps = str(direction), float(max_gamma), int(steps)

    def gammas(self) -> np.ndarray:
        """The searched grid, largest first."""
        return self.max_gamma * 2.0 ** -np.arange(self.steps)

    def vectors(self, U: np.ndarray, bad: np.ndarray, rng: np.random.Generator, oracle: Oracle) -> np.ndarray:
        mu, p = direction(U, bad, self.direction)
        crafted = U.copy()
        best, best_gamma = -np.inf, 0.0
        for gamma in self.gammas():  # one aggregator call per candidate: the aggregator is the oracle
            crafted[bad] = mu + gamma * p
            deviation = float(np.linalg.norm(oracle(crafted) - mu))
            if deviation > best:
                best, best_gamma = deviation, float(gamma)
        return np.broadcast_to(mu + best_gamma * p, (int(bad.sum()), U.shape[1])).copy()
