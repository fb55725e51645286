"""Who takes part in which round: the population schedule of a run, recomputed from its seed.

``federation.train`` (its ``schedule.RoundSchedule``) with a ``population`` of N persistent users draws round r's cohort as ``clients`` users
uniformly without replacement, ``np.sort(stream(seed, "cohort", r).choice(N, clients,
replace=False))``; this module draws the same cohorts without training, so that the privacy a user
spends (``defenses.accounting``) is charged for the participations it really had.

numpy's ``Generator.choice(N, n, replace=False)`` never materialises the population when
``n <= N / 50``: it runs Floyd's algorithm with a hash set of about ``1.2 n`` entries (a billion
users cost nothing); above that it shuffles the tail of an ``arange(N)``, O(N) memory.
Participations are kept for the users who took part only (``Participations``): O(rounds x
clients) memory whatever N, and each count exact.
"""

from __future__ import annotations

import numpy as np

from fltr_audit.engine.randomness import stream


def cohort(seed: int, round_index: int, clients: int, population: int) -> np.ndarray:
    """The sorted user ids of round ``round_index``'s cohort (as ``federation.train`` draws it)."""
    return np.sort(stream(seed, "cohort", round_index).choice(population, clients, replace=False))


class Participations:
    """Realized participations of the users ``0 .. population - 1``, stored sparsely: ``users``
    (sorted) took part ``counts`` times each (>= 1); every other user 0 times. The dense reference
    is ``np.bincount`` of the cohorts (``dense``)."""

    def __init__(self, population: int):
        self.population = int(population)
        self.users = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)

    def of(self, ids: np.ndarray) -> np.ndarray:
        """The participations so far of the users ``ids`` (any order, repeats allowed)."""
        ids = np.asarray(ids, dtype=np.int64)
        if not len(self.users):
            return np.zeros(ids.shape, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.users, ids), len(self.users) - 1)
        return np.where(self.users[at] == ids, self.counts[at], 0)

    def add(self, ids: np.ndarray) -> None:
        """One more participation for each distinct user of ``ids`` (as ``dense[ids] += 1``)."""
        ids = np.unique(np.asarray(ids, dtype=np.int64))
        at = np.searchsorted(self.users, ids)
        found = at < len(self.users)
        found[found] = self.users[at[found]] == ids[found]
        self.counts[at[found]] += 1
        new = ids[~found]
        self.users = np.insert(self.users, at[~found], new)
        self.counts = np.insert(self.counts, at[~found], np.ones(len(new), dtype=np.int64))

    def max(self) -> int:
        """The most participations of any user (0 when nobody took part)."""
        return int(self.counts.max(initial=0))

    def mean(self) -> float:
        """The mean over all ``population`` users (``dense().mean()``, the same float)."""
        return float(self.counts.sum()) / self.population

    def dense(self) -> np.ndarray:
        """Every user's count, shape (population,): for tests and small populations only."""
        out = np.zeros(self.population, dtype=np.int64)
        out[self.users] = self.counts
        return out


def participations(seed: int, rounds: int, clients: int, population: int | None) -> Participations:
    """Realized participations of each of the ``population`` users over ``rounds`` rounds: without a
    population the same ``clients`` users take part in every round (all counts ``rounds``)."""
    out = Participations(population or clients)
    if population is None:
        out.users = np.arange(clients, dtype=np.int64)
        out.counts = np.full(clients, rounds, dtype=np.int64)
        return out
    for r in range(1, rounds + 1):
        out.add(cohort(seed, r, clients, population))
    return out
