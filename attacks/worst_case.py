"""Worst-case neighbouring inputs for a defense stack, from the mechanisms it declares.

White-box audits with crafted inputs are tight (Nasr et al. 2021, 2023). The inputs are placed
``OVERSHOOT`` times beyond the declared clip, along the direction that uses all the sensitivity
the claim allows, so that a defense which clips as it declares brings them back to its clip
boundary (the tight pair), and one that does not clip (a plug-in whose claim is false) lets the
whole difference through:

* L1-clipped Laplace: +-Delta/2 on one coordinate (L1 distance Delta);
* L2 clip + Gaussian: +-C along one axis (L2 distance 2C);
* L2-clipped Laplace and Gamma shares: the vector spread evenly over all D coordinates,
  +-(Delta/2)/sqrt(D) each (L1 distance Delta sqrt(D), their worst case);
* randomized response: the two ends of the domain (every pair has the largest ratio);
* a noisy aggregator (add/remove one user): the update at the clip against no update;
* a stack that declares no noise: +-``UNDECLARED`` on one coordinate (the learned test decides).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attacks.stack_outputs import noise_declarations
from fltr_audit.privacy import mechanisms as mech

OVERSHOOT = 4.0
"""How far beyond the declared clip the crafted inputs lie (a clipping defense maps them onto it)."""
UNDECLARED = 10.0
"""The crafted inputs' size on one coordinate when the stack declares no noise to size them by."""


def aggregator_noise(stack: Any) -> Any:
    """The noise the stack's aggregator declares (``AggregatorGaussian``, ``DiscreteGaussianSum``),
    else None."""
    m = mech.declared(stack.aggregator)
    return m if isinstance(m, mech.AGGREGATOR_NOISE) else None


def worst_case_inputs(stack: Any, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The two crafted inputs (updates, or metric values for randomized response) that use all the
    sensitivity the declared mechanism allows, ``OVERSHOOT`` beyond its clip (module docstring)."""
    agg = aggregator_noise(stack)
    if agg is not None:  # add/remove: the target's update against no update
        e = np.zeros(dim)
        e[0] = OVERSHOOT * agg.clip
        return np.zeros(dim), e
    comps = noise_declarations(stack)
    last = comps[-1] if comps else None
    if isinstance(last, mech.RandomizedResponse):
        return np.array([min(last.values)]), np.array([max(last.values)])
    e = np.zeros(dim)
    if isinstance(last, mech.Gaussian):
        e[0] = OVERSHOOT * last.clip
    elif isinstance(last, mech.Laplace) and last.norm == "l1":
        e[0] = OVERSHOOT * last.sensitivity / 2
    elif isinstance(last, (mech.Laplace, mech.GammaShares)):  # L2-clipped
        e[:] = OVERSHOOT * last.sensitivity / 2 / math.sqrt(dim)
    else:
        e[0] = UNDECLARED
    return -e, e


def claimed_mu(stack: Any, rounds: int = 1) -> float:
    """Gaussian-DP mu of the stack's declared Gaussian mechanism over ``rounds`` rounds (Dong, Roth
    & Su 2022, Cor. 3.3: sqrt(rounds) times one round's); NaN for other mechanisms."""
    agg = aggregator_noise(stack)
    if isinstance(agg, mech.AggregatorGaussian):  # sensitivity C (add/remove), std z C: mu = 1/z
        return math.sqrt(rounds) / agg.noise_multiplier
    if isinstance(agg, mech.DiscreteGaussianSum):  # rho-zCDP is the Gaussian mechanism's curve at mu = sqrt(2 rho)
        return math.sqrt(2.0 * agg.rho * rounds) if agg.xi == 0 else float("nan")
    comps = noise_declarations(stack)
    if isinstance(mech.declared(stack.aggregator), mech.Shuffle) or len(comps) != 1 \
            or not isinstance(comps[0], mech.Gaussian):
        return float("nan")
    return 2.0 * comps[0].clip / comps[0].std * math.sqrt(rounds)
