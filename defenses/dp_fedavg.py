"""User-level DP-FedAvg with a trusted server (McMahan et al., ICLR 2018), optionally with
adaptive clipping (Andrew et al., NeurIPS 2021)."""

from __future__ import annotations

import copy
import math

import numpy as np

from defenses.dp_gaussian import gaussian_epsilon
from defenses.secagg import require_vectors
from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.errors import FltrError
from defenses.mechanism_events import dp_event
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine.interfaces import Aggregate, AggregatorBase, PrivacyClaim
from fltr_audit.engine.messages import Messages


def clip_updates(updates: np.ndarray, clip: float) -> np.ndarray:
    """Each row scaled by min(1, clip / ||row||_2) (zero rows stay zero)."""
    norms = np.linalg.norm(updates, axis=1)
    return updates * np.where(norms > clip, clip / np.where(norms > 0, norms, 1.0), 1.0)[:, None]


def update_noise_multiplier(total: float, count_std: float) -> float:
    """The noise multiplier left for the update sum when the clipped-count query of adaptive
    clipping spends part of the budget (Andrew et al. 2021, Sec. 3.1): the two Gaussian
    mechanisms (sum: sensitivity C, std z_D C; count of b_i - 1/2: sensitivity 1/2, std
    count_std) compose to one of multiplier z with z^-2 = z_D^-2 + (2 count_std)^-2."""
    rest = total**-2 - (2.0 * count_std) ** -2
    return math.inf if rest <= 0 else rest**-0.5


class DPFedAvg(AggregatorBase):
    """``dp-fedavg(noise_multiplier=z, clip=C, dp_delta, quantile, lr, count_std)``, an aggregator.

    Each participant's update (its weights minus the global model) is clipped to L2 norm C;
    the trusted server sums the m clipped updates, adds N(0, (z C)^2) per coordinate and
    divides by the cohort size m (the fixed-denominator estimator of McMahan et al. with
    every user weighted 1, so one user moves the sum by at most C: add/remove-one-user
    neighbours). The server, and any attack on its view, sees only this noisy mean.

    Claim, per round and per participating user, scope ``aggregate``: the Gaussian mechanism
    with sensitivity C and std z C, i.e. ``gaussian_epsilon(dp_delta, C, z C)``;
    ``dp_event()`` is ``GaussianDpEvent(z)``, which the accountant composes with the
    sampling rate over the rounds a user takes part in.

    Adaptive clipping (``quantile`` = gamma in (0, 1); 0 keeps C fixed): after each round
    C <- C exp(-lr (b_bar - gamma)), b_bar = (sum_i 1[||update_i|| <= C] + N(0, count_std^2)) / m,
    the privately estimated fraction of updates under the clip (geometric update, Andrew et
    al. Alg. 1). The count's noise is part of the privacy cost: the update sum then gets the
    smaller multiplier z_D = ``update_noise_multiplier(z, count_std)`` so that both queries
    together are one Gaussian mechanism of multiplier z and the claim is unchanged (needs
    count_std > z / 2; Andrew et al. suggest count_std = m / 20). The clip norm is state
    kept in this object across rounds, driven by the round's seeded aggregation stream.
    """

    reads_global_model = True  # the engine passes ``global_params`` (updates are clipped)
    accepts_rule = True  # a robust rule may replace the mean (``with_rule``, defenses.robust.compose)
    rule = None

    def __init__(self, noise_multiplier: float = 1.0, clip: float = 1.0, dp_delta: float = 1e-5,
                 quantile: float = 0.0, lr: float = 0.2, count_std: float = 50.0, name: str = "dp-fedavg"):
        self.noise_multiplier, self.initial_clip, self.dp_delta = float(noise_multiplier), float(clip), float(dp_delta)
        self.quantile, self.lr, self.count_std, self.name = float(quantile), float(lr), float(count_std), name
        try:
            for parameter, value in (("noise_multiplier", self.noise_multiplier), ("clip", self.initial_clip)):
                check(parameter, value, (Interval(float, 0.0, math.inf, closed="neither"),))
            check("quantile", self.quantile, (Interval(float, 0.0, 1.0, closed="left"),))   # 0: fixed clipping
        except ParameterError as exc:
            raise exc.within(f"{name}: ") from None
        if self.adaptive and not 2.0 * self.count_std > self.noise_multiplier:
            raise FltrError(f"{name}: count_std = {self.count_std:g} must exceed noise_multiplier / 2 "
                            f"= {self.noise_multiplier / 2:g} (the count's noise is paid from the same budget)")
        self.clip = self.initial_clip
        eps = gaussian_epsilon(self.dp_delta, 1.0, self.noise_multiplier)  # sensitivity C, std z C: scale-free
        self.claim = PrivacyClaim(epsilon=eps, delta=self.dp_delta, scope="aggregate")

    @property
    def adaptive(self) -> bool:
        return self.quantile > 0.0

    @property
    def update_multiplier(self) -> float:
        """z_D: the multiplier of the noise on the update sum (z with fixed clipping)."""
        return update_noise_multiplier(self.noise_multiplier, self.count_std) if self.adaptive else self.noise_multiplier

    @property
    def mechanism(self) -> mech.AggregatorGaussian:
        """Declared: N(0, (z_D C)^2) on the sum of updates clipped to C (the initial C when adaptive)."""
        return mech.AggregatorGaussian(self.noise_multiplier, self.update_multiplier, self.initial_clip, self.adaptive,
                                       "mean" if self.rule is None else self.rule.name)

    def with_rule(self, rule) -> "DPFedAvg":
        """A copy combining the clipped updates by the robust ``rule`` instead of their mean, under the
        same noise and the same claim, which were calibrated for the mean (``m`` times the rule's
        output takes the sum's place)."""
        out = copy.copy(self)
        out.rule, out.name = rule, f"{rule.name}+{self.name}"
        return out

    def dp_event(self):
        """One round for one participating user, from the declaration: ``GaussianDpEvent(z)``."""
        return dp_event(self.mechanism, self.claim)

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator,
                  global_params: np.ndarray | None = None) -> Aggregate:
        """The noisy mean (in the messages' vector kind); ``global_params`` is the model the
        cohort started from (None: the vectors are taken as the updates)."""
        require_vectors(messages, self.name)
        g = np.zeros(messages.vector.shape[1]) if global_params is None else np.asarray(global_params, dtype=np.float64)
        updates = messages.updates(g)
        m = messages.n_clients
        clip = self.clip
        norms = np.linalg.norm(updates, axis=1)
        if self.rule is None:
            total = clip_updates(updates, clip).sum(axis=0)
        else:
            self.rule.prepare(g, rng)
            total = m * self.rule.combine(clip_updates(updates, clip), np.ones(m))
        noisy_mean = (total + rng.normal(0.0, self.update_multiplier * clip, size=total.shape)) / m
        stats = {"clip": clip, "clipped_fraction": float((norms > clip).mean()), "noise_std_of_mean":
                 self.update_multiplier * clip / m}
        if self.adaptive:
            below = (float((norms <= clip).sum()) + rng.normal(0.0, self.count_std)) / m
            self.clip = clip * math.exp(-self.lr * (below - self.quantile))
            stats["next_clip"] = self.clip
        mean = noisy_mean + g if messages.vector_kind == "weights" else noisy_mean
        return Aggregate(mean=mean, participants=np.asarray(participants), dropouts=np.empty(0, dtype=np.int64),
                         messages=None, stats=stats)
