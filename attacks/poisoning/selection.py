"""Who is malicious: ``fraction`` of every cohort, by a counter-based rank of the user id.

Each user u has a malice rank ``U(seed, u)`` (``who = "fixed"``) or ``U(seed, u, round)``
(``who = "round"``), U the counter-based uniform of ``fltr_audit.engine.population``; the
``m = floor(fraction n)`` members of a cohort of n with the smallest ranks are malicious. With the
same clients in every round (FPDGD's setting) ``fixed`` makes the same m users malicious in every
round, as the ``--n_malicious`` clients of the Unlearning-for-FOLTR code; with a population, users of
low rank are malicious whenever they take part. ``round`` draws them afresh each round. A cohort
too small for one malicious member (``fraction n < 1``) has none (``malicious_clients`` 0 in its row).
"""

from __future__ import annotations

import numpy as np

from fltr_audit.engine.population import counter_uniform

_SALT = 0x6D616C6963696F75  # "malicious": keeps the ranks apart from every other per-user draw


def malicious_count(fraction: float, n: int) -> int:
    """``floor(fraction n)``, robust to the float error of the product (0.29 * 100 is 28.999...)."""
    return int(np.floor(float(fraction) * int(n) + 1e-9))


def malicious_mask(client_ids: np.ndarray, round_index: int, fraction: float, who: str, seed: int) -> np.ndarray:
    """Bool (n,): the ``malicious_count`` members of the cohort with the smallest malice ranks."""
    ids = np.asarray(client_ids, dtype=np.int64)
    m = malicious_count(fraction, len(ids))
    mask = np.zeros(len(ids), dtype=bool)
    if m == 0:
        return mask
    salted = (int(seed) * 0x2545F4914F6CDD1D + _SALT) % 2**64
    keys = (ids,) if who == "fixed" else (ids, np.full(len(ids), int(round_index), dtype=np.int64))
    rank = counter_uniform(salted, *keys)
    mask[np.argpartition(rank, m - 1)[:m]] = True
    return mask


class Malicious:
    """The selection part every poisoning attack shares: ``fraction``, ``who`` and the run seed."""

    clicks = None

    def __init__(self, fraction: float, who: str = "fixed", seed: int = 0, name: str = "poison") -> None:
        self.fraction, self.who, self.seed, self.name = float(fraction), str(who), int(seed), name

    def malicious(self, client_ids: np.ndarray, round_index: int) -> np.ndarray:
        return malicious_mask(client_ids, round_index, self.fraction, self.who, self.seed)
