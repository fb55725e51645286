"""Control plug-ins of issue 37 (deliberately broken claims): a Laplace that declares an L1 clip and clips
in L2, and a Gaussian whose noise is calibrated on half its sensitivity (clip instead of 2 clip)."""
import numpy as np
from defenses.registration import register_defense
from defenses.dp_gaussian import gaussian_epsilon
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine.interfaces import PrivacyClaim


class L2ClippedLaplace:
    """Declares Laplace on an L1 clip (sensitivity Delta = eps * scale), clips in L2."""
    privatizes = "vector"

    def __init__(self, eps: float = 1.0, scale: float = 1.0):
        self.claim = PrivacyClaim(eps, 0.0, "message")
        self.mechanism = mech.Laplace(scale, eps * scale, "l1")
        self.scale, self.name = scale, f"l2clipped-laplace(eps={eps:g})"

    def apply(self, messages, global_params, rng):
        u = messages.updates(global_params)
        norms = np.linalg.norm(u, axis=1, keepdims=True)
        u = u * np.minimum(1.0, self.mechanism.sensitivity / 2 / np.maximum(norms, 1e-300))
        return messages.with_updates(u + rng.laplace(0.0, self.scale, size=u.shape), global_params)


class HalfSensitivityGaussian:
    """Clips to C, calibrates sigma on sensitivity C (not 2C): claims eps for a mechanism whose true eps is larger."""
    privatizes = "vector"

    def __init__(self, sigma: float = 1.0, clip: float = 1.0, dp_delta: float = 1e-5):
        self.clip, self.std = clip, sigma * clip
        self.claim = PrivacyClaim(gaussian_epsilon(dp_delta, clip, self.std), dp_delta, "message")
        self.mechanism = mech.Gaussian(self.std, clip)
        self.name = f"halfsens-gaussian(sigma={sigma:g})"

    def apply(self, messages, global_params, rng):
        u = messages.updates(global_params)
        norms = np.linalg.norm(u, axis=1, keepdims=True)
        u = u * np.minimum(1.0, self.clip / np.maximum(norms, 1e-300))
        return messages.with_updates(u + rng.normal(0.0, self.std, size=u.shape), global_params)


def register():
    register_defense("l2clipped-laplace", L2ClippedLaplace, replace=True)
    register_defense("halfsens-gaussian", HalfSensitivityGaussian, replace=True)
