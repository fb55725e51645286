"""The poisoning of the unlearning audit's check (ECIR 2024; Tao et al., SIGIR 2025, "data
poisoning"): the ``data-poison`` attack (``attacks.poisoning.data``: malicious users click by the
inverted click model of the Unlearning-for-FOLTR code and otherwise follow the protocol), carried by
a *given* set of users -- the ones the run will forget -- whenever they take part, instead of a
fraction of each cohort chosen by rank.
"""

from __future__ import annotations

import numpy as np

from attacks.poisoning.catalog import check_applies
from attacks.poisoning.data import DataPoison
from fltr_audit.constraints import ParameterError


class ForgottenPoisoners(DataPoison):
    """``data-poison`` (``click``, default ``inverted``) by the users in ``users`` (sorted ids)."""

    def __init__(self, users: np.ndarray, n_levels: int, click: str = "inverted", seed: int = 0) -> None:
        super().__init__(0.0, click=click, n_levels=n_levels, seed=seed,
                         name=f"data-poison(click={click},users={len(users)})")
        self.users = np.sort(np.asarray(users, dtype=np.int64))

    def malicious(self, client_ids: np.ndarray, round_index: int) -> np.ndarray:
        """Bool (n,): the members of the cohort that are among ``users``."""
        return np.isin(np.asarray(client_ids, dtype=np.int64), self.users)


def check_poisonable(algorithm: str, message_kind: str, user_clicks: bool) -> None:
    """ParameterError naming ``poison_check`` when ``data-poison`` cannot ride on ``algorithm``
    (``attacks.poisoning.catalog.check_applies``: it needs per-user clicks)."""
    try:
        check_applies("data-poison", algorithm, message_kind, user_clicks)
    except ParameterError as exc:
        raise ParameterError("poison_check", exc.problem) from None
