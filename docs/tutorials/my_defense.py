"""A defense of your own, as a plug-in: local Laplace noise on each client's update.

``BuggyLaplace`` declares the textbook mechanism -- clip the update to L1 norm ``sensitivity / 2``,
then add Laplace noise of scale ``sensitivity / eps`` to every coordinate -- and claims ``eps``-DP
per message, but calibrates its noise to the clip bound: two clipped updates can differ by twice
the clip, so its noise is half what the claim needs. ``FixedLaplace`` adds the noise it declares.
The audit tells them apart from the declaration alone (docs/tutorials/your-own-defense.md).
"""

from __future__ import annotations

import numpy as np

from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.engine.messages import Messages
from fltr_audit.privacy import mechanisms


class BuggyLaplace:
    """Local Laplace noise calibrated to the clip bound instead of the sensitivity."""

    privatizes = "vector"  # it transforms a vector message (FPDGD's weights, FedIPS's update)

    def __init__(self, eps: float = 1.0, sensitivity: float = 1.0):
        self.eps, self.clip = eps, sensitivity / 2
        self.claim = PrivacyClaim(eps, 0.0, "message")  # what it promises: eps-DP for each message
        self.mechanism = mechanisms.Laplace(scale=sensitivity / eps, sensitivity=sensitivity, norm="l1")

    def noise_scale(self) -> float:
        return self.clip / self.eps  # the bug: the clip bound, not the sensitivity (twice the clip)

    def apply(self, messages: Messages, global_params: np.ndarray, rng: np.random.Generator) -> Messages:
        updates = messages.updates(global_params)
        norms = np.abs(updates).sum(axis=1, keepdims=True)  # clip each update to L1 norm sensitivity / 2
        updates = updates * np.minimum(1.0, self.clip / np.maximum(norms, 1e-12))
        noise = rng.laplace(0.0, self.noise_scale(), size=updates.shape)
        return messages.with_updates(updates + noise, global_params)


class FixedLaplace(BuggyLaplace):
    """The same defense, adding the noise it declares."""

    def noise_scale(self) -> float:
        return self.mechanism.scale  # sensitivity / eps, as declared
