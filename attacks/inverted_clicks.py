"""Inverted-click data poisoning, the minimum the unlearning audit's poisoning check needs (ECIR 2024;
Tao et al., SIGIR 2025, "data poisoning"): malicious users click by their click model applied to
*inverted* labels -- relevance r read as ``levels - 1 - r`` -- which for a cascade model is the
"Poison" click model of the Unlearning-for-FOLTR code (MQ2007's perfect model {0: 0, 1: 0.5, 2: 1}
turned into {0: 1, 1: 0.5, 2: 0}). Honest users click exactly as without the attack (the same
uniforms are drawn for every list). A placeholder: the ``data-poison`` attack of the robustness work
(``engine.poisoning``) replaces it once it lands (``runs.unlearning_poison`` is the one caller).

It needs an algorithm that simulates each user's own clicks (``AlgorithmSpec.user_clicks``: FPDGD,
PDGD) and users that share one click model: per-user populations (``--non-iid document-preference``,
``click-preference``) are refused (``check_poisonable``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fltr_audit.constraints import ParameterError
from fltr_audit.engine.population import NonIID, UserClicks


@dataclass(frozen=True, eq=False)
class InvertedClicks(UserClicks):
    """The users in ``malicious`` (sorted ids) click by ``base`` on inverted labels, the others by
    ``base`` itself; a ``UserClicks``, so the algorithm passes each list's user
    (``engine.population.simulate_clicks``)."""

    malicious: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    @property
    def name(self) -> str:
        return f"{self.base.name}+inverted"

    def simulate_users(self, labels_shown: np.ndarray, data: Any, rows: np.ndarray, users: np.ndarray,
                       rng: np.random.Generator) -> np.ndarray:
        """Clicks (n, ..., k) of user ``users[i]`` on labels ``labels_shown[i]``."""
        labels = np.asarray(labels_shown)
        bad = np.isin(np.asarray(users, dtype=np.int64), self.malicious)
        bad = bad.reshape(bad.shape + (1,) * (labels.ndim - bad.ndim))
        top = self.base.n_levels - 1
        return self.base.simulate(np.where(bad & (labels >= 0), top - labels, labels), rng)


def check_poisonable(algorithm: str, user_clicks: bool, non_iid: NonIID) -> None:
    """ParameterError naming ``poison_check`` for an algorithm that does not simulate each user's
    clicks (``user_clicks`` of its spec) or a population whose users click by their own models."""
    if not user_clicks:
        raise ParameterError("poison_check", f"the inverted-click poisoning needs an algorithm that simulates each "
                                             f"user's clicks (fpdgd, pdgd), not {algorithm}")
    if non_iid.per_user_clicks:
        raise ParameterError("poison_check", f"the inverted-click poisoning needs users that share one click model, "
                                             f"not {non_iid.name}")


def poisoned(algorithm: Any, malicious: np.ndarray) -> Any:
    """A shallow copy of ``algorithm`` whose ``malicious`` users click on inverted labels."""
    out = copy.copy(algorithm)
    out.click_model = InvertedClicks(algorithm.click_model, NonIID(), 0, (),
                                     np.sort(np.asarray(malicious, dtype=np.int64)))
    return out
