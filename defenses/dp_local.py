"""Local Laplace mechanism on the clipped update (each message protected on its own)."""

from __future__ import annotations

import numpy as np

from defenses.clipping import check_noise_scale, clip_rows, require_vector
from defenses.mechanism_events import dp_event
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.engine.messages import Messages


class LocalLaplace:
    """``dp-local-laplace(eps, sensitivity, norm)``: clip each update theta_c - theta_global to norm
    Delta/2, then add Laplace(0, Delta/eps) to every coordinate. Claim: eps, scope ``message``.

    With ``norm=l1`` (default) any two clipped updates differ by at most Delta in L1, the
    sensitivity the Laplace mechanism needs, so the claim holds. ``norm=l2`` is the published
    L2-clipped variant with the same claim: two L2-clipped updates can differ by up to
    Delta * sqrt(P) in L1, so the claim is understated there -- kept for the audit to test.
    """

    privatizes = "vector"

    def __init__(self, eps: float = 4.5, sensitivity: float = 5.0, norm: str = "l1", name: str = "dp-local-laplace"):
        self.eps, self.sensitivity, self.norm, self.name = float(eps), float(sensitivity), norm, name
        check_noise_scale(name, "Delta/eps", self.sensitivity / self.eps)
        self.claim = PrivacyClaim(epsilon=self.eps, delta=0.0, scope="message")

    @property
    def scale(self) -> float:
        """The Laplace scale Delta / epsilon."""
        return self.sensitivity / self.eps

    @property
    def mechanism(self) -> mech.Laplace:
        """Declared: Laplace(Delta/eps) on the update clipped to ``norm`` Delta/2."""
        return mech.Laplace(self.scale, self.sensitivity, self.norm, "update")

    def dp_event(self):
        """One round, from the declaration: ``LaplaceDpEvent(1 / eps)`` (the claimed L1 sensitivity
        Delta; understated for ``norm=l2``, as the claim is)."""
        return dp_event(self.mechanism, self.claim)

    def apply(self, messages: Messages, global_params: np.ndarray, rng: np.random.Generator) -> Messages:
        require_vector(messages, self.name)
        update = clip_rows(messages.updates(global_params), self.sensitivity / 2, self.norm)
        noisy = update + rng.laplace(0.0, self.scale, size=update.shape)
        return messages.with_updates(noisy, global_params)
