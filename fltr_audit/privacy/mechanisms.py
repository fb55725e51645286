"""Declared mechanisms: what a defense does to a message, as a value object it carries.

In the spirit of dp-accounting's ``DpEvent``: every defense says what it does in its
``mechanism`` attribute (one of the frozen dataclasses below, or None when it declares
nothing), and the worst-case audit, the mechanism-aware tests, the Bayes likelihood and the
accountant read that declaration -- never the defense's attribute names.

* ``Clipping(bound, of, norm)``: deterministic; rows of the update (or weights) scaled to norm
  at most ``bound``.
* ``Laplace(scale, sensitivity, norm, of)``: clip to norm ``sensitivity / 2`` (L1 or L2), add
  i.i.d. Laplace(``scale``) per coordinate.
* ``Gaussian(std, clip, sensitivity)``: clip the update to L2 norm ``clip``, add N(0, ``std``^2) per
  coordinate (``sensitivity``: what the noise was calibrated on, when not tied to the clip).
* ``GammaShares(scale, sensitivity)``: clip the weights to L2 norm ``sensitivity / 2``, add one
  share ``Gamma(1/n, scale) - Gamma(1/n, scale)`` per coordinate (n = the cohort; the n shares
  of a cohort sum to Laplace(``scale``)).
* ``RandomizedResponse(p, values)``: keep a metric value with probability ``p``, else send one
  of the other values of the domain uniformly.
* ``AggregatorGaussian(noise_multiplier, std_multiplier, clip, adaptive, combine)``: an aggregator
  clipping each update to L2 norm ``clip`` and adding N(0, (``std_multiplier`` clip)^2) to the sum
  (or to ``m`` times a robust rule's combination, ``combine``); the claim is for multiplier
  ``noise_multiplier``.
* ``DiscreteGaussianSum(noise_multiplier, clip, rho, xi)``: an aggregator summing clipped,
  rounded updates with distributed discrete Gaussian shares (zCDP ``(rho, xi)``).
* ``Shuffle(n, amplified)``: an anonymous shuffler behind one local randomizer.
* ``QuantizedSum(clipping_range, quantization_range, modulus_range)``: an aggregator releasing
  only the sum of the cohort's values, each clipped to +-``clipping_range`` and stochastically
  quantized to ``quantization_range`` levels, summed modulo ``modulus_range`` (secure
  aggregation as Flower's SecAgg+ configures it); no noise.

``check_declaration`` validates a declaration when a defense is built: an unknown kind or
parameters no mechanism can have (a scale of 0, p <= 1/k, ...) are a one-line ``FltrError``
naming the defense.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Union

from fltr_audit.errors import FltrError

NORMS = ("l1", "l2")
TARGETS = ("update", "weights")


@dataclass(frozen=True)
class Clipping:
    """Rows scaled by ``min(1, bound / ||row||)`` (``norm``), of the update or of the weights."""

    bound: float
    of: str = "update"
    norm: str = "l2"
    kind = "clip"


@dataclass(frozen=True)
class Laplace:
    """Clip to norm ``sensitivity / 2``, add Laplace(``scale``) per coordinate."""

    scale: float
    sensitivity: float
    norm: str = "l1"
    of: str = "update"
    kind = "laplace"


@dataclass(frozen=True)
class Gaussian:
    """Clip the update to L2 norm ``clip`` (sensitivity 2 clip between two messages), add
    N(0, ``std``^2) per coordinate. ``sensitivity``: the L2 sensitivity the defense calibrated its
    noise on when it takes one apart from the clip (Flower's ``LocalDpMod``), else None."""

    std: float
    clip: float
    sensitivity: float | None = None
    kind = "gaussian"


@dataclass(frozen=True)
class GammaShares:
    """Clip the weights to L2 norm ``sensitivity / 2``, add a Gamma(1/n, ``scale``) difference per
    coordinate, n the cohort size (FPDGD Alg. 3, Eq. 15-16)."""

    scale: float
    sensitivity: float
    of: str = "weights"
    kind = "gamma-share"


@dataclass(frozen=True)
class RandomizedResponse:
    """Keep a value with probability ``p``, else one of the other ``len(values) - 1`` uniformly."""

    p: float
    values: tuple[float, ...]
    kind = "rr"


@dataclass(frozen=True)
class AggregatorGaussian:
    """An aggregator: each update clipped to L2 norm ``clip``, N(0, (``std_multiplier`` clip)^2) on
    the sum (``std_multiplier`` below ``noise_multiplier`` when part of the budget goes elsewhere,
    e.g. adaptive clipping's count); ``adaptive``: the clip moves every round from ``clip``."""

    noise_multiplier: float
    std_multiplier: float
    clip: float
    adaptive: bool = False
    combine: str = "mean"
    """How the clipped updates are combined before the noise: ``mean`` (DP-FedAvg), or the name of a
    robust rule that replaces it (``defenses.robust.compose``; the noise stays calibrated for the mean)."""
    kind = "aggregator-gaussian"


@dataclass(frozen=True)
class DiscreteGaussianSum:
    """An aggregator: updates clipped to L2 norm ``clip``, rounded, summed with distributed discrete
    Gaussian shares (std ``noise_multiplier`` clip on the sum); (xi, rho)-zCDP per round."""

    noise_multiplier: float
    clip: float
    rho: float
    xi: float = 0.0
    kind = "discrete-gaussian"


@dataclass(frozen=True)
class Shuffle:
    """An aggregator: the cohort's messages shuffled, senders removed; ``amplified`` when the claim
    is the amplified one for cohorts of at least ``n``."""

    n: int
    amplified: bool = False
    kind = "shuffle"


@dataclass(frozen=True)
class QuantizedSum:
    """An aggregator releasing only the modular sum of the cohort's quantized values: each value
    clipped to [-``clipping_range``, ``clipping_range``], stochastically rounded to one of
    ``quantization_range`` levels, summed modulo ``modulus_range``; no noise (no DP claim)."""

    clipping_range: float
    quantization_range: int
    modulus_range: int
    kind = "quantized-sum"


Mechanism = Union[Clipping, Laplace, Gaussian, GammaShares, RandomizedResponse, AggregatorGaussian,
                  DiscreteGaussianSum, Shuffle, QuantizedSum]
KNOWN = (Clipping, Laplace, Gaussian, GammaShares, RandomizedResponse, AggregatorGaussian, DiscreteGaussianSum,
         Shuffle, QuantizedSum)
NOISE = (Laplace, Gaussian, GammaShares, RandomizedResponse)
"""Mechanisms a client defense adds noise with."""
AGGREGATOR_NOISE = (AggregatorGaussian, DiscreteGaussianSum)
"""Mechanisms an aggregator adds noise with."""


def declared(defense: Any) -> Mechanism | None:
    """The mechanism ``defense`` declares (its ``mechanism`` attribute), None when it declares none."""
    return getattr(defense, "mechanism", None)


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf


def _problem(m: Any) -> str | None:
    """What is impossible about the declaration ``m`` (None when it is a valid mechanism)."""
    if not isinstance(m, KNOWN):
        kinds = ", ".join(k.kind for k in KNOWN)
        return f"declares an unknown mechanism kind {type(m).__name__} (known: {kinds})"
    positive = {Clipping: ("bound",), Laplace: ("scale", "sensitivity"), Gaussian: ("std", "clip"),
                GammaShares: ("scale", "sensitivity"), AggregatorGaussian: ("noise_multiplier", "clip"),
                DiscreteGaussianSum: ("noise_multiplier", "clip"),
                QuantizedSum: ("clipping_range", "quantization_range", "modulus_range")}.get(type(m), ())
    for field in positive:
        if not _positive(getattr(m, field)):
            return f"declares {m.kind} with {field} = {getattr(m, field)!r}; it must be a positive finite number"
    if getattr(m, "norm", "l2") not in NORMS:
        return f"declares {m.kind} with norm {m.norm!r}; choose {' or '.join(NORMS)}"
    if getattr(m, "of", "update") not in TARGETS:
        return f"declares {m.kind} of {m.of!r}; choose {' or '.join(TARGETS)}"
    if isinstance(m, RandomizedResponse):
        k = len(set(m.values))
        if k < 2 or k != len(m.values):
            return "declares rr over fewer than two distinct values"
        if not (isinstance(m.p, (int, float)) and 1.0 / k < m.p <= 1.0):
            return f"declares rr with p = {m.p!r}; it needs 1/k < p <= 1 (k = {k})"
    if isinstance(m, AggregatorGaussian) and not (_positive(m.std_multiplier) or m.std_multiplier == math.inf):
        return f"declares aggregator-gaussian with std_multiplier = {m.std_multiplier!r}; it must be positive"
    if isinstance(m, DiscreteGaussianSum) and not (m.rho >= 0 and m.xi >= 0):
        return f"declares discrete-gaussian with rho = {m.rho!r}, xi = {m.xi!r}; both must be >= 0"
    if isinstance(m, QuantizedSum) and not m.modulus_range > m.quantization_range:
        return (f"declares quantized-sum with modulus_range = {m.modulus_range!r} <= quantization_range "
                f"= {m.quantization_range!r}")
    if isinstance(m, Shuffle) and not (isinstance(m.n, int) and m.n >= 2):
        return f"declares shuffle with n = {m.n!r}; it needs n >= 2"
    return None


def check_declaration(defense: Any, role: str = "client") -> Mechanism | None:
    """The validated declaration of ``defense`` (None when it declares nothing); FltrError naming
    the defense for an unknown kind, impossible parameters, or a kind its role cannot have (an
    aggregator mechanism on a client defense or the reverse)."""
    m = declared(defense)
    if m is None:
        return None
    name = getattr(defense, "name", type(defense).__name__)
    problem = _problem(m)
    if problem is None and role == "client" and isinstance(m, (*AGGREGATOR_NOISE, Shuffle, QuantizedSum)):
        problem = f"is a client defense but declares the aggregator mechanism {m.kind}"
    if problem is None and role == "aggregator" and isinstance(m, NOISE):
        problem = f"is an aggregator but declares the client mechanism {m.kind}"
    if problem:
        raise FltrError(f"defense {name!r}: {problem}")
    return m
