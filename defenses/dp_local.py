"""Local Laplace mechanism on the clipped update (each message protected on its own), textbook or
with Mironov's snapping (CCS 2012), which closes the floating-point side channel of the textbook
sampler."""

from __future__ import annotations

import math

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

    ``snapping=true``: Mironov's snapping mechanism (CCS 2012, Sec. 5.2) per coordinate, scale
    lambda = Delta/eps: ``clamp_B(round_L(clamp_B(u) + S lambda ln U))`` with S a random sign, U
    uniform over the doubles of (0, 1] (a 52-bit mantissa and a geometric exponent), L the
    smallest power of two >= lambda and B = Delta/2 + ``SNAP_TAILS`` lambda. Its outputs are
    multiples of L, whose low bits carry nothing; it is (eps + 2^-49 B / lambda eps)-DP for
    lambda < B < 2^46 lambda, the claim eps up to that term. The textbook sampler
    (``numpy``'s ``laplace``) leaks the value through the noise's last bits, which
    ``attacks.float_channel`` flags.
    """

    SNAP_TAILS = 64.0
    """B = Delta/2 + this many scales: the output clamp cuts the noise beyond e^-64."""

    privatizes = "vector"

    def __init__(self, eps: float = 4.5, sensitivity: float = 5.0, norm: str = "l1", snapping: str = "false",
                 name: str = "dp-local-laplace"):
        self.eps, self.sensitivity, self.norm, self.name = float(eps), float(sensitivity), norm, name
        self.snapping = snapping == "true"
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
        noisy = self._snapped(update, rng) if self.snapping else update + rng.laplace(0.0, self.scale, size=update.shape)
        return messages.with_updates(noisy, global_params)

    def _snapped(self, u: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Mironov's snapping mechanism on every coordinate of ``u`` (class docstring)."""
        lam = self.scale
        bound = self.sensitivity / 2 + self.SNAP_TAILS * lam
        grid = 2.0 ** math.ceil(math.log2(lam))
        mantissa = rng.integers(0, 1 << 52, size=u.shape).astype(np.float64)
        uniform = (2.0**52 + mantissa) * np.exp2(-(52.0 + rng.geometric(0.5, size=u.shape)))  # exact, in (0, 1)
        sign = np.where(rng.random(u.shape) < 0.5, -1.0, 1.0)
        noisy = np.clip(u, -bound, bound) + sign * lam * np.log(uniform)
        return np.clip(grid * np.round(noisy / grid), -bound, bound)
