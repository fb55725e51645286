"""Norm clipping of client vectors (FPDGD Algorithm 3, Eq. 13) and the checks the
vector defenses share."""

from __future__ import annotations

import numpy as np

from fltr_audit.errors import FltrError
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.engine.messages import Messages


MAX_NOISE_SCALE = 1e10
"""Largest noise scale (Laplace lambda, Gaussian std) a defense accepts: beyond it the noise
drowns any model (features are O(1)) and sums of it overflow float64 into NaN models."""


def check_noise_scale(name: str, what: str, scale: float) -> None:
    """FltrError naming ``what`` (e.g. ``Delta/eps``) unless the noise scale is finite, positive
    and at most :data:`MAX_NOISE_SCALE`."""
    if not (0 < scale <= MAX_NOISE_SCALE):
        raise FltrError(f"{name}: noise scale {what} = {scale:.3g} must lie in (0, {MAX_NOISE_SCALE:g}] "
                        "(larger noise overflows the model into NaN)")


def clip_rows(x: np.ndarray, bound: float, norm: str = "l2") -> np.ndarray:
    """Scale each row of ``x`` by ``min(1, bound / ||row||)`` (Eq. 13 with bound = Delta/2)."""
    norms = np.abs(x).sum(axis=1) if norm == "l1" else np.linalg.norm(x, axis=1)
    scale = np.minimum(1.0, bound / np.maximum(norms, np.finfo(np.float64).tiny))
    return x * scale[:, None]


def require_vector(messages: Messages, defense: str) -> None:
    """Refuse messages without a parameter vector (FOLtR-ES sends a seed and metric values)."""
    if messages.vector is None:
        raise FltrError(f"{defense}: needs vector messages (FPDGD weights or FedIPS updates); "
                        "these carry none (FOLtR-ES sends seeds and metric values: use rr)")


class Clip:
    """``clip(sensitivity, of)``: clip each client's weights (FPDGD Algorithm 3: theta <- theta *
    min(1, Delta / (2 ||theta||))) or its update theta_c - theta_global to L2 norm Delta/2,
    so that any two clipped messages differ by at most Delta. Claims nothing on its own."""

    privatizes = "vector"

    claim = PrivacyClaim()

    def __init__(self, sensitivity: float = 5.0, of: str = "weights", name: str = "clip"):
        self.sensitivity, self.of, self.name = float(sensitivity), of, name

    @property
    def mechanism(self) -> mech.Clipping:
        """Declared: L2 clipping to Delta/2 of the weights or the update (no noise)."""
        return mech.Clipping(self.sensitivity / 2, self.of, "l2")

    def apply(self, messages: Messages, global_params: np.ndarray, rng: np.random.Generator) -> Messages:
        require_vector(messages, self.name)
        if self.of == "weights":
            clipped = clip_rows(messages.weights(global_params), self.sensitivity / 2)
            return messages.with_weights(clipped, global_params)
        clipped = clip_rows(messages.updates(global_params), self.sensitivity / 2)
        return messages.with_updates(clipped, global_params)
