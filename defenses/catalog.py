"""The defenses a stack string may name: one ``Spec`` per defense, with its role, builder,
parameters (type, default, check, inherited default, canonical key, deprecated alias), summary
and claimed guarantee. ``defenses.stack`` parses strings against this table;
``defenses.registration`` adds plug-ins to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from defenses.clipping import NORMS, TARGETS, Clip
from defenses.ddgauss import DDGauss
from defenses.dp_fedavg import DPFedAvg
from defenses.dp_distributed import DistributedLaplace
from defenses.dp_gaussian import Gaussian
from defenses.dp_local import LocalLaplace
from defenses.randomized_response import MAXRR_VALUES, RandomizedResponse
from defenses.secagg import IdealSecAgg
from defenses.secagg_protocol import SecAggProtocol
from defenses.shuffle import Shuffle
from fltr_audit.constraints import Constraint, Interval, Satisfies
from fltr_audit.engine.interfaces import Role


@dataclass(frozen=True)
class Param:
    """One parameter: its type (``float``, ``int``, ``choice``, ``values``), default, the
    constraints a number must satisfy (``fltr_audit.constraints``), where a default is inherited from a preceding clip,
    whether it is a ``key`` parameter, always written in the canonical name, and a deprecated
    ``alias`` still accepted (with a warning) in place of ``name``."""

    name: str
    kind: str
    default: Any
    help: str
    constraints: tuple[Constraint, ...] = ()
    choices: tuple[str, ...] = ()
    inherit: Callable[[Clip], Any] | None = None
    key: bool = False
    alias: str | None = None


@dataclass(frozen=True)
class Spec:
    """One defense of the catalog: its name, role (client or aggregator), factory, typed
    parameters, summary and the guarantee it states. ``build`` is called with the parameters as
    keywords and ``name=`` the component's canonical text (``dp-local-laplace(eps=1)``), which the
    defense keeps as its ``name`` (stack names, rows, errors): an in-tree defense class accepts a
    ``name`` keyword; a plug-in's factory need not (``defenses.registration`` wraps it)."""

    name: str
    role: Role
    build: Callable[..., Any]
    params: tuple[Param, ...]
    summary: str
    guarantee: str


_LARGEST = 1e100  # larger values overflow squares and sums of squares into inf / NaN


_positive = (Interval(float, 0.0, _LARGEST, closed="right"),)
_unit_open = (Interval(float, 0.0, 1.0, closed="neither"),)
_rate = (Interval(float, 0.0, 1.0, closed="left"),)
_degree = (Satisfies(int, lambda v: v >= 0 and v % 2 == 0, "0 (complete graph) or an even number >= 2"),)
_bits = (Interval(int, 16, 64),)


_EPS = Param("eps", "float", 4.5, "privacy budget epsilon", _positive, key=True)
_SENSITIVITY = Param("sensitivity", "float", 5.0, "sensitivity Delta (clip to Delta/2)", _positive,
                     inherit=lambda c: c.sensitivity, alias="delta")

SPECS: dict[str, Spec] = {s.name: s for s in (
    Spec("clip", "client", Clip,
         (Param("sensitivity", "float", 5.0, "sensitivity Delta: clip to L2 norm Delta/2", _positive, key=True,
                alias="delta"),
          Param("of", "choice", "weights", "clip the local weights (FPDGD Alg. 3) or the update", choices=TARGETS)),
         "L2 clipping of the weights or of the update", "none"),
    Spec("dp-distributed", "client", DistributedLaplace, (_EPS, _SENSITIVITY),
         "FPDGD Alg. 3: clip weights to Delta/2, add Gamma(1/n, Delta/eps) differences; the cohort sum is Laplace",
         "epsilon = eps, scope aggregate (as published)"),
    Spec("dp-local-laplace", "client", LocalLaplace,
         (_EPS, _SENSITIVITY, Param("norm", "choice", "l1", "clip norm (l2: the published variant)", choices=NORMS),
          Param("snapping", "choice", "false", "Mironov's snapping sampler (true) instead of the textbook one",
                choices=("false", "true"))),
         "clip the update to norm Delta/2, add Laplace(Delta/eps) per coordinate (snapping=true: Mironov 2012)",
         "epsilon = eps, scope message"),
    Spec("dp-gaussian", "client", Gaussian,
         (Param("sigma", "float", 1.0, "noise multiplier (std = sigma * clip)", _positive, key=True),
          Param("clip", "float", 1.0, "L2 clip norm C of the update", _positive, inherit=lambda c: c.sensitivity / 2),
          Param("dp_delta", "float", 1e-5, "delta of the (epsilon, delta) claim", _unit_open)),
         "clip the update to L2 norm C, add N(0, (sigma C)^2) per coordinate",
         "epsilon from the analytic Gaussian mechanism (sensitivity 2C), delta = dp_delta, scope message"),
    Spec("rr", "client", RandomizedResponse,
         (Param("p", "float", 0.9, "probability of sending the true value (needs p > 1/n)", _positive, key=True),
          Param("values", "values", MAXRR_VALUES, "the finite domain (default MaxRR of a top-10 list, n = 11)")),
         "randomized response on FOLtR-ES metric values (FOLtR-ES Section 3.3)",
         "epsilon = log(p (n-1) / (1-p)) per value, scope message"),
    Spec("secagg", "aggregator", IdealSecAgg,
         (Param("drop", "float", 0.0, "rate of clients dropping out after key exchange", _rate),),
         "ideal secure aggregation: the server sees only the weighted mean of the survivors",
         "no DP (epsilon = inf); reveals only the aggregate"),
    Spec("secagg-protocol", "aggregator", SecAggProtocol,
         (Param("drop", "float", 0.0, "rate of clients dropping out after key exchange", _rate),
          Param("k", "int", 0, "neighbour degree (SecAgg+); 0 = complete graph", _degree),
          Param("threshold", "float", 0.5, "Shamir threshold t = floor(threshold * holders) + 1", _unit_open),
          Param("bits", "int", 64, "ring Z_(2^bits)", _bits),
          Param("range", "float", 64.0, "fixed-point clipping range of each coordinate", _positive)),
         "Bonawitz et al. 2017 double masking (X25519, HKDF-SHA256, AES-CTR masks, Shamir shares)",
         "no DP (epsilon = inf); reveals only the aggregate"),
    Spec("dp-fedavg", "aggregator", DPFedAvg,
         (Param("noise_multiplier", "float", 1.0, "z: the sum's noise std is z * clip", _positive, key=True),
          Param("clip", "float", 1.0, "L2 clip norm C of each update (the initial one when adaptive)", _positive,
                inherit=lambda c: c.sensitivity / 2),
          Param("dp_delta", "float", 1e-5, "delta of the (epsilon, delta) claim", _unit_open),
          Param("quantile", "float", 0.0, "adaptive clipping: target quantile of update norms (0: fixed clip)", _rate),
          Param("lr", "float", 0.2, "adaptive clipping: learning rate of the geometric clip update", _positive),
          Param("count_std", "float", 50.0, "adaptive clipping: noise std of the clipped count (m/20 advised)",
                _positive)),
         "user-level DP-FedAvg (McMahan et al. 2018): trusted server sums updates clipped to C, adds "
         "N(0, (z C)^2), divides by the cohort size; adaptive clipping (Andrew et al. 2021) optional",
         "Gaussian mechanism, sensitivity C, std z C: epsilon at dp_delta per round, scope aggregate"),
    Spec("ddgauss", "aggregator", DDGauss,
         (Param("noise_multiplier", "float", 1.0, "z: the sum's noise std is z * clip", _positive, key=True),
          Param("clip", "float", 1.0, "L2 clip norm C of each update", _positive, inherit=lambda c: c.sensitivity / 2),
          Param("bits", "int", 20, "modular secure aggregation in Z_(2^bits)", (Interval(int, 2, 62),)),
          Param("n", "int", 1000, "cohort size the scale and the claim are computed for", (Interval(int, 1, None),)),
          Param("dim", "int", 64, "padded dimension (a power of two >= the model's parameters)",
                (Satisfies(int, lambda v: v >= 1 and v & (v - 1) == 0, "a power of two"),)),
          Param("dp_delta", "float", 1e-5, "delta of the (epsilon, delta) claim", _unit_open),
          Param("secagg", "choice", "sum", "the modular sum: exact numpy sum, or the Bonawitz protocol",
                choices=("sum", "protocol"))),
         "distributed discrete Gaussian (Kairouz, Liu, Steinke 2021): clip, rotate, scale, conditional "
         "randomized rounding, per-client discrete Gaussian shares, modular secure sum in Z_(2^bits)",
         "the paper's zCDP bound for the cohort n, as (epsilon, dp_delta) per round, scope aggregate"),
    Spec("shuffle", "aggregator", Shuffle,
         (Param("n", "int", 1000, "cohort size the amplified claim assumes", (Interval(int, 2, None),)),
          Param("dp_delta", "float", 1e-6, "delta of the amplified (epsilon, delta) claim", _unit_open)),
         "anonymous shuffler: the server gets the cohort's messages without senders, in random order "
         "(threat model 'server (shuffled)'); follows a local randomizer (dp-local-laplace, rr)",
         "amplification by shuffling (Feldman, McMillan, Talwar 2021, Thm 3.1) of the local eps0, "
         "scope aggregate; eps0 (scope message) outside the theorem's condition"),
)}
