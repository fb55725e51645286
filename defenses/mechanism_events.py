"""A declared mechanism (``fltr_audit.privacy.mechanisms``) as one round's ``dp_accounting`` event.

* ``Laplace`` / ``GammaShares``: ``LaplaceDpEvent(scale / sensitivity)`` (the claimed L1
  sensitivity; understated for L2 clipping, as the published claims are);
* ``Gaussian`` (client): ``GaussianDpEvent(std / (2 clip))`` (replace-one sensitivity 2C);
* ``RandomizedResponse`` over k values: ``RandomizedResponseDpEvent(k (1 - p) / (k - 1), k)``
  (dp-accounting sends a uniform value with probability ``noise``, the true one included);
* ``AggregatorGaussian``: ``GaussianDpEvent(noise_multiplier)`` (sensitivity C, std z C);
* ``DiscreteGaussianSum``: ``ZCDpEvent(rho, xi)``;
* ``Shuffle``: the binary randomized response of the claimed epsilon,
  ``RandomizedResponseDpEvent(2 / (1 + e^eps), 2)`` (Kairouz, Oh, Viswanath 2015), its delta paid
  per round by the accountant.
"""

from __future__ import annotations

import math
from typing import Any

from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine.interfaces import PrivacyClaim


def dp_event(mechanism: Any, claim: PrivacyClaim) -> Any:
    """One round's ``dp_accounting`` event of ``mechanism`` (None for one without noise: clipping,
    or no declaration)."""
    # start-up: dp_accounting costs 0.6 s CPU; only an accountant's event needs it
    import dp_accounting as dpa

    if isinstance(mechanism, (mech.Laplace, mech.GammaShares)):
        return dpa.LaplaceDpEvent(mechanism.scale / mechanism.sensitivity)
    if isinstance(mechanism, mech.Gaussian):
        return dpa.GaussianDpEvent(mechanism.std / (2 * mechanism.clip))
    if isinstance(mechanism, mech.RandomizedResponse):
        k = len(mechanism.values)
        return dpa.RandomizedResponseDpEvent(k * (1.0 - mechanism.p) / (k - 1), k)
    if isinstance(mechanism, mech.AggregatorGaussian):
        return dpa.GaussianDpEvent(mechanism.noise_multiplier)
    if isinstance(mechanism, mech.DiscreteGaussianSum):
        return dpa.ZCDpEvent(mechanism.rho, mechanism.xi)
    if isinstance(mechanism, mech.Shuffle):
        return dpa.RandomizedResponseDpEvent(2.0 / (1.0 + math.exp(claim.epsilon)), 2)
    return None
