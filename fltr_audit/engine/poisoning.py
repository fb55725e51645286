"""Poisoning clients in a round: the engine's side of an integrity threat (DESIGN.md, Threat models).

A ``Poisoning`` (built by ``attacks.poisoning`` from a ``PoisonSpec``, fresh for each run) names
the malicious clients of each cohort and acts in one of two ways:

* **data poisoning** -- its ``clicks`` is the click model the malicious users click by (e.g. the
  inverted cascade of the Unlearning-for-FOLTR code); they then follow the protocol on those
  clicks. The round's algorithm clicks by ``PoisonedClicks`` (the honest users by their own model,
  with the very uniforms they would have drawn without the attack, so honest clicks are unchanged);
  only algorithms whose type declares ``user_clicks`` pass each user to their click model.
* **model poisoning** -- ``craft`` replaces the malicious rows of the cohort's messages after the
  honest clients' defenses (a malicious device skips them) and before aggregation, knowing the
  benign messages, the global model and the aggregator (the omniscient attacker of LIE, IPM and
  the aggregator-tailored attacks).

``run_round`` applies both, records the number of malicious clients in the round's metrics and the
mask in the ground truth (``GroundTruth.private["malicious"]``), so that privacy scoring of
recorded training rounds can leave poisoned clients out; the probe of an audit is never poisoned.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from fltr_audit.constraints import ParameterError
from fltr_audit.engine.clicks import CascadeClickModel, check_levels
from fltr_audit.engine.messages import Messages


class Poisoning(Protocol):
    """Malicious clients of every cohort (see the module docstring)."""

    name: str
    clicks: Any
    """The malicious users' click model (data poisoning), or None (model poisoning)."""

    def malicious(self, client_ids: np.ndarray, round_index: int) -> np.ndarray:
        """Which members of the cohort ``client_ids`` are malicious in round ``round_index``: bool (n,)."""
        ...

    def craft(self, messages: Messages, malicious: np.ndarray, global_params: np.ndarray, aggregator: Any,
              rng: np.random.Generator) -> Messages:
        """The cohort's messages with the malicious rows replaced (vectorized over the cohort)."""
        ...


@dataclass(frozen=True, eq=False)
class PoisonClicks:
    """A malicious user's click model: scanned top-down as the cascade is, clicking a document of
    label r at rank i with probability ``(1 / i) ** gamma * click_prob[r]`` and stopping after a click
    with ``stop_prob[r]`` (``gamma = 0``: a cascade model; ``stop_prob = 0``: no stopping)."""

    name: str
    click_prob: np.ndarray
    stop_prob: np.ndarray
    gamma: float = 0.0

    @property
    def n_levels(self) -> int:
        return len(self.click_prob)

    def tables(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Per rank (k,) and label (levels + 1, the last for an empty slot) the probabilities of a
        click and of a click followed by a stop, shape (k, levels + 1) each."""
        exam = np.arange(1, k + 1, dtype=np.float64)[:, None] ** -float(self.gamma)
        click = exam * np.append(np.asarray(self.click_prob, dtype=np.float64), 0.0)[None, :]
        return click, click * np.append(np.asarray(self.stop_prob, dtype=np.float64), 0.0)[None, :]


@dataclass(frozen=True, eq=False)
class PoisonedClicks:
    """The round's click model under data poisoning: users in ``malicious`` click by ``poison``, the
    others by ``base`` (a cascade model, or a per-user model of a non-IID population)."""

    per_user: ClassVar[bool] = True
    base: Any
    poison: PoisonClicks
    malicious: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def n_levels(self) -> int:
        return self.base.n_levels

    def simulate(self, labels_shown: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Clicks of users not named: the honest model's."""
        return self.base.simulate(labels_shown, rng)

    def simulate_users(self, labels_shown: np.ndarray, data: Any, rows: np.ndarray, users: np.ndarray,
                       rng: np.random.Generator) -> np.ndarray:
        """Clicks (n, ..., k) of user ``users[i]`` on its lists ``labels_shown[i]``."""
        labels = np.asarray(labels_shown)
        check_levels(self.base, labels)
        bad = np.isin(np.asarray(users, dtype=np.int64), self.malicious)
        if isinstance(self.base, CascadeClickModel):
            return self._scan(labels, bad, rng)
        clicks = np.zeros(labels.shape, dtype=bool)
        if (~bad).any():
            clicks[~bad] = self.base.simulate_users(labels[~bad], data, np.asarray(rows)[~bad],
                                                    np.asarray(users)[~bad], rng)
        if bad.any():
            clicks[bad] = PoisonedClicks(self.base, self.poison, np.asarray(users)[bad])._scan(
                labels[bad], np.ones(int(bad.sum()), dtype=bool), rng)
        return clicks

    def _scan(self, labels: np.ndarray, bad: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One uniform per list and rank, drawn as ``CascadeClickModel.simulate`` draws them, decides
        the click and the stop of honest rows (base tables) and malicious rows (poison tables)."""
        k = labels.shape[-1]
        bad = bad.reshape(bad.shape + (1,) * (labels.ndim - 1 - bad.ndim))
        if isinstance(self.base, CascadeClickModel):
            base_click, base_stop = self.base._click_ext, self.base._stop_ext
        else:
            base_click = base_stop = np.zeros(self.poison.n_levels + 1)
        click, stop = self.poison.tables(k)
        clicks = np.empty(labels.shape, dtype=bool)
        alive = np.ones(labels.shape[:-1], dtype=bool)
        for i in range(k):
            lab = labels[..., i]
            u = rng.random(alive.shape)
            p_click = np.where(bad, click[i][lab], base_click[lab])
            p_stop = np.where(bad, stop[i][lab], base_stop[lab])
            clicks[..., i] = (u < p_click) & alive
            alive &= u >= p_stop
        return clicks


def poisoned_algorithm(algorithm: Any, poisoning: Poisoning, client_ids: np.ndarray, malicious: np.ndarray) -> Any:
    """``algorithm`` itself, or -- for data poisoning with malicious members -- a shallow copy whose
    users click by ``PoisonedClicks``; ParameterError naming ``poison`` unless the algorithm's type
    declares ``user_clicks`` (it passes each user to its click model)."""
    if poisoning.clicks is None or not malicious.any():
        return algorithm
    if not getattr(type(algorithm), "user_clicks", False):
        raise ParameterError("poison", f"{poisoning.name}: {getattr(algorithm, 'name', type(algorithm).__name__)} "
                                       "does not simulate per-user clicks, so its users cannot click by another model")
    out = copy.copy(algorithm)
    out.click_model = PoisonedClicks(algorithm.click_model, poisoning.clicks,
                                     np.sort(np.asarray(client_ids, dtype=np.int64)[malicious]))
    return out
