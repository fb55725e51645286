"""Gaussian mechanism on the L2-clipped update, with the analytic (epsilon, delta) bound."""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from defenses.clipping import check_noise_scale, clip_rows, require_vector
from fltr_audit.errors import FltrError
from defenses.mechanism_events import dp_event
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.engine.messages import Messages


def gaussian_delta(epsilon: float, sensitivity: float, std: float) -> float:
    """The smallest delta for which N(0, std^2) noise on an L2-sensitivity-``sensitivity``
    query is (epsilon, delta)-DP (Balle & Wang 2018, Theorem 8):
    Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D)."""
    a, b = sensitivity / (2 * std), epsilon * std / sensitivity
    return float(ndtr(a - b) - np.exp(epsilon + log_ndtr(-a - b)))


def gaussian_epsilon(delta: float, sensitivity: float, std: float) -> float:
    """The smallest epsilon with ``gaussian_delta(epsilon) <= delta`` (root of a decreasing function)."""
    if gaussian_delta(0.0, sensitivity, std) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_delta(hi, sensitivity, std) > delta:
        hi *= 2.0
    return float(brentq(lambda e: gaussian_delta(e, sensitivity, std) - delta, 0.0, hi, xtol=1e-12))


class Gaussian:
    """``dp-gaussian(sigma, clip, dp_delta)``: clip each update to L2 norm C = ``clip``, add
    N(0, (sigma C)^2) per coordinate. Any two clipped updates differ by at most 2C in L2
    (message scope: the neighbour of a message is any other message), so the claim is the
    analytic Gaussian-mechanism epsilon for sensitivity 2C, std sigma C and ``dp_delta``,
    per round, scope ``message``."""

    privatizes = "vector"

    def __init__(self, sigma: float = 1.0, clip: float = 1.0, dp_delta: float = 1e-5, name: str = "dp-gaussian"):
        self.sigma, self.clip, self.dp_delta, self.name = float(sigma), float(clip), float(dp_delta), name
        check_noise_scale(name, "sigma*clip", self.std)
        with np.errstate(all="ignore"):
            try:
                eps = gaussian_epsilon(self.dp_delta, 2 * self.clip, self.std)
            except (ValueError, OverflowError, ZeroDivisionError):
                eps = float("nan")
        if not np.isfinite(eps):
            raise FltrError(f"{name}: sigma={self.sigma:g} is too small for an (epsilon, delta) claim "
                            "(epsilon overflows); use a larger sigma")
        self.claim = PrivacyClaim(epsilon=eps, delta=self.dp_delta, scope="message")

    @property
    def std(self) -> float:
        """The noise standard deviation sigma * C."""
        return self.sigma * self.clip

    @property
    def mechanism(self) -> mech.Gaussian:
        """Declared: N(0, (sigma C)^2) on the update clipped to L2 norm C."""
        return mech.Gaussian(self.std, self.clip)

    def dp_event(self):
        """One round, from the declaration: ``GaussianDpEvent(sigma / 2)`` (std sigma C over the
        sensitivity 2C; under add/remove-one it gives exactly the claimed epsilon at ``dp_delta``)."""
        return dp_event(self.mechanism, self.claim)

    def apply(self, messages: Messages, global_params: np.ndarray, rng: np.random.Generator) -> Messages:
        require_vector(messages, self.name)
        update = clip_rows(messages.updates(global_params), self.clip)
        noisy = update + rng.normal(0.0, self.std, size=update.shape)
        return messages.with_updates(noisy, global_params)
