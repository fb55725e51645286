"""Who takes part in which round: the population schedule of a run, recomputed from its seed.

``train`` with a ``population`` of N persistent users draws round r's cohort as ``clients`` users
uniformly without replacement, ``np.sort(stream(seed, "cohort", r).choice(N, clients,
replace=False))``; this module draws the same cohorts without training, so that the privacy a user
spends (``defenses.accounting``) is charged for the participations it really had.
"""

from __future__ import annotations

import numpy as np

from fltr_audit.engine.footprint import check_population_memory
from fltr_audit.engine.randomness import stream


def cohort(seed: int, round_index: int, clients: int, population: int) -> np.ndarray:
    """The sorted user ids of round ``round_index``'s cohort (as ``federation.train`` draws it)."""
    return np.sort(stream(seed, "cohort", round_index).choice(population, clients, replace=False))


def participation_counts(seed: int, rounds: int, clients: int, population: int | None) -> np.ndarray:
    """Realized participations of each of the ``population`` users over ``rounds`` rounds, shape (N,):
    without a population the same ``clients`` users take part in every round (all counts ``rounds``)."""
    if population is None:
        return np.full(clients, rounds, dtype=np.int64)
    check_population_memory(population)
    counts = np.zeros(population, dtype=np.int64)
    for r in range(1, rounds + 1):
        counts[cohort(seed, r, clients, population)] += 1
    return counts
