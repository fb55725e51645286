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

That pair (the *declared-norm* pair) is right only if the declaration is. ``worst_case_pairs``
adds the pairs that do not depend on it, at the same radius r (the declared clip, or half the
declared sensitivity): the *one-coordinate* pair (+-``OVERSHOOT`` r on one coordinate, the worst
case of an L1 clip) and the *evenly spread* pair (+-``OVERSHOOT`` r / sqrt(D) on every coordinate,
the worst case of an L2-clipped Laplace: a plug-in that declares an L1 clip but clips in L2 lets
through an L1 distance sqrt(D) times its claim). The audit keeps the pair its held-out half finds
strongest (``attacks.epsilon_bounds.audit_chosen``).

``claimed_mu``: the mu-GDP a claim asserts when the declared law is Gaussian -- the largest mu whose
curve is (eps, delta)-DP at the claim's (eps, delta) (``fltr_audit.privacy.claim_decision.gdp_mu``),
composed over rounds as sqrt(rounds) mu: the claim, not the declaration, is what is tested (a
noise calibrated on half the sensitivity declares its true law and a claim twice too small).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attacks.stack_outputs import noise_declarations
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.privacy.claim_decision import gdp_mu

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


def _radius(stack: Any) -> float:
    """The size r of one input of the declared-norm pair before ``OVERSHOOT`` (its clip, or half the
    declared sensitivity; ``UNDECLARED / OVERSHOOT`` when nothing is declared)."""
    agg = aggregator_noise(stack)
    if agg is not None:
        return agg.clip
    comps = noise_declarations(stack)
    last = comps[-1] if comps else None
    if isinstance(last, mech.Gaussian):
        return last.clip
    if isinstance(last, (mech.Laplace, mech.GammaShares)):
        return last.sensitivity / 2
    return UNDECLARED / OVERSHOOT


def worst_case_pairs(stack: Any, dim: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The declared-norm pair (``worst_case_inputs``), then the one-coordinate and the evenly spread
    pairs at its radius where they differ from it (module docstring); only the declared pair for a
    randomized response or a one-dimensional message."""
    declared = worst_case_inputs(stack, dim)
    pairs = {"declared-norm": declared}
    if dim < 2 or isinstance((noise_declarations(stack) or [None])[-1], mech.RandomizedResponse):
        return pairs
    size = OVERSHOOT * _radius(stack)
    one, spread = np.zeros(dim), np.full(dim, size / math.sqrt(dim))
    one[0] = size
    add_remove = aggregator_noise(stack) is not None  # the target's update against no update
    for name, e in (("one-coordinate", one), ("spread", spread)):
        pair = (np.zeros(dim), e) if add_remove else (-e, e)
        if not any(np.array_equal(pair[0], p[0]) and np.array_equal(pair[1], p[1]) for p in pairs.values()):
            pairs[name] = pair
    return pairs


def claimed_mu(stack: Any, rounds: int = 1) -> float:
    """The mu-GDP the stack's claim asserts over ``rounds`` rounds when its declared law is
    Gaussian (module docstring; Dong, Roth & Su 2022, Cor. 3.3: sqrt(rounds) times one round's);
    NaN for other mechanisms (and for a discrete Gaussian with xi > 0)."""
    agg = aggregator_noise(stack)
    comps = noise_declarations(stack)
    if isinstance(agg, mech.DiscreteGaussianSum):
        gaussian = agg.xi == 0
    else:
        gaussian = isinstance(agg, mech.AggregatorGaussian) or (
            not isinstance(mech.declared(stack.aggregator), mech.Shuffle) and len(comps) == 1
            and isinstance(comps[0], mech.Gaussian))
    if not gaussian:
        return float("nan")
    return gdp_mu(stack.claim.epsilon, stack.claim.delta) * math.sqrt(rounds)


def sensitivity_note(stack: Any) -> str:
    """The cause a verdict names when the declared Gaussian's noise was calibrated on a sensitivity
    below twice its clip (two clipped updates lie up to 2 clip apart): Flower's ``LocalDpMod``
    finding; empty otherwise."""
    comps = noise_declarations(stack)
    last = comps[-1] if comps else None
    if not isinstance(last, mech.Gaussian) or last.sensitivity is None or last.sensitivity >= 2 * last.clip:
        return ""
    return (f"the guarantee depends on a sensitivity Flower does not tie to the clip: the noise is calibrated on "
            f"sensitivity {last.sensitivity:g}, but updates clipped to {last.clip:g} differ by up to "
            f"{2 * last.clip:g} (LocalDpMod)")
