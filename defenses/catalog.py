"""The defenses a stack string may name: one ``Spec`` per defense, with its role, builder,
parameters (type, default, check, inherited default, canonical key, deprecated alias), summary,
claimed guarantee, and the claim and view of its defaults. ``defenses.stack`` parses strings
against this table; ``defenses.registration`` adds plug-ins to it.

The table imports no defense: each builder is a ``Lazy`` reference (``fltr_audit.base.lazy``), imported when a stack is
built, so that ``defenses list`` answers without numpy (``tests/test_defenses_catalog.py`` holds
the declared claims and views to what the built defenses say).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from defenses.parameter_domains import MAXRR_VALUES, NORMS, TARGETS
from fltr_audit.base.defense_terms import PrivacyClaim, Role, Sees
from fltr_audit.base.lazy import Lazy
from fltr_audit.constraints import Constraint, Interval, Satisfies

if TYPE_CHECKING:
    from defenses.clipping import Clip


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
    default_claim: PrivacyClaim | None = None
    """The claim of the defaults (None: build the defense to know it, as for a plug-in)."""
    sees: Sees | None = None
    """What an aggregator with its defaults must see (None: a client defense, or build to know)."""


def format_value(value: Any) -> str:
    """A parameter value as a defense string writes it (floats to 12 significant digits)."""
    if isinstance(value, tuple):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, float):
        return format(value, ".12g")
    return str(value)


_LARGEST = 1e100  # larger values overflow squares and sums of squares into inf / NaN


_positive = (Interval(float, 0.0, _LARGEST, closed="right"),)
_unit_open = (Interval(float, 0.0, 1.0, closed="neither"),)
_rate = (Interval(float, 0.0, 1.0, closed="left"),)
_degree = (Satisfies(int, lambda v: v >= 0 and v % 2 == 0, "0 (complete graph) or an even number >= 2"),)
_bits = (Interval(int, 16, 64),)
_count = (Interval(int, 0, None),)
_NONE = PrivacyClaim()
_AGGREGATE_ONLY = PrivacyClaim(scope="aggregate")
_NO_CLAIM = "none (integrity: a robust rule, no DP claim)"
_VIEW = Param("view", "choice", "updates", "what the server sees: each update, or only the released output "
             "(the rule inside a secure robust-aggregation protocol)", choices=("updates", "output"))
_F = Param("f", "int", 1, "Byzantine clients tolerated (needs a cohort n >= 2f + 3)", _count, key=True)


_EPS = Param("eps", "float", 4.5, "privacy budget epsilon", _positive, key=True)
_SENSITIVITY = Param("sensitivity", "float", 5.0, "sensitivity Delta (clip to Delta/2)", _positive,
                     inherit=lambda c: c.sensitivity, alias="delta")

SPECS: dict[str, Spec] = {s.name: s for s in (
    Spec("clip", "client", Lazy("defenses.clipping:Clip"),
         (Param("sensitivity", "float", 5.0, "sensitivity Delta: clip to L2 norm Delta/2", _positive, key=True,
                alias="delta"),
          Param("of", "choice", "weights", "clip the local weights (FPDGD Alg. 3) or the update", choices=TARGETS)),
         "L2 clipping of the weights or of the update", "none",
         default_claim=_NONE),
    Spec("dp-distributed", "client", Lazy("defenses.dp_distributed:DistributedLaplace"), (_EPS, _SENSITIVITY),
         "FPDGD Alg. 3: clip weights to Delta/2, add Gamma(1/n, Delta/eps) differences; the cohort sum is Laplace",
         "epsilon = eps, scope aggregate (as published)",
         default_claim=PrivacyClaim(4.5, 0.0, "aggregate")),
    Spec("dp-local-laplace", "client", Lazy("defenses.dp_local:LocalLaplace"),
         (_EPS, _SENSITIVITY, Param("norm", "choice", "l1", "clip norm (l2: the published variant)", choices=NORMS),
          Param("snapping", "choice", "false", "Mironov's snapping sampler (true) instead of the textbook one",
                choices=("false", "true"))),
         "clip the update to norm Delta/2, add Laplace(Delta/eps) per coordinate (snapping=true: Mironov 2012)",
         "epsilon = eps, scope message",
         default_claim=PrivacyClaim(4.5, 0.0, "message")),
    Spec("dp-gaussian", "client", Lazy("defenses.dp_gaussian:Gaussian"),
         (Param("sigma", "float", 1.0, "noise multiplier (std = sigma * clip)", _positive, key=True),
          Param("clip", "float", 1.0, "L2 clip norm C of the update", _positive, inherit=lambda c: c.sensitivity / 2),
          Param("dp_delta", "float", 1e-5, "delta of the (epsilon, delta) claim", _unit_open)),
         "clip the update to L2 norm C, add N(0, (sigma C)^2) per coordinate",
         "epsilon from the analytic Gaussian mechanism (sensitivity 2C), delta = dp_delta, scope message",
         default_claim=PrivacyClaim(9.997256146434303, 1e-05, "message")),
    Spec("rr", "client", Lazy("defenses.randomized_response:RandomizedResponse"),
         (Param("p", "float", 0.9, "probability of sending the true value (needs p > 1/n)", _positive, key=True),
          Param("values", "values", MAXRR_VALUES, "the finite domain (default MaxRR of a top-10 list, n = 11)")),
         "randomized response on FOLtR-ES metric values (FOLtR-ES Section 3.3)",
         "epsilon = log(p (n-1) / (1-p)) per value, scope message",
         default_claim=PrivacyClaim(4.499809670330265, 0.0, "message")),
    Spec("secagg", "aggregator", Lazy("defenses.secagg:IdealSecAgg"),
         (Param("drop", "float", 0.0, "rate of clients dropping out after key exchange", _rate),),
         "ideal secure aggregation: the server sees only the weighted mean of the survivors",
         "no DP (epsilon = inf); reveals only the aggregate",
         default_claim=_AGGREGATE_ONLY, sees="sum"),
    Spec("secagg-protocol", "aggregator", Lazy("defenses.secagg_protocol:SecAggProtocol"),
         (Param("drop", "float", 0.0, "rate of clients dropping out after key exchange", _rate),
          Param("k", "int", 0, "neighbour degree (SecAgg+); 0 = complete graph", _degree),
          Param("threshold", "float", 0.5, "Shamir threshold t = floor(threshold * holders) + 1", _unit_open),
          Param("bits", "int", 64, "ring Z_(2^bits)", _bits),
          Param("range", "float", 64.0, "fixed-point clipping range of each coordinate", _positive)),
         "Bonawitz et al. 2017 double masking (X25519, HKDF-SHA256, AES-CTR masks, Shamir shares)",
         "no DP (epsilon = inf); reveals only the aggregate",
         default_claim=_AGGREGATE_ONLY, sees="sum"),
    Spec("dp-fedavg", "aggregator", Lazy("defenses.dp_fedavg:DPFedAvg"),
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
         "Gaussian mechanism, sensitivity C, std z C: epsilon at dp_delta per round, scope aggregate",
         default_claim=PrivacyClaim(4.377178095681235, 1e-05, "aggregate"), sees="updates"),
    Spec("ddgauss", "aggregator", Lazy("defenses.ddgauss:DDGauss"),
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
         "the paper's zCDP bound for the cohort n, as (epsilon, dp_delta) per round, scope aggregate",
         default_claim=PrivacyClaim(4.7324577494932605, 1e-05, "aggregate"), sees="sum"),
    Spec("median", "aggregator", Lazy("defenses.robust.aggregators:Median"), (_VIEW,),
         "coordinate-wise median of the updates (Yin et al. 2018); sees each update", _NO_CLAIM,
         default_claim=_NONE, sees="updates"),
    Spec("trimmed-mean", "aggregator", Lazy("defenses.robust.aggregators:TrimmedMean"),
         (Param("beta", "float", 0.1, "share trimmed at each end, floor(beta n) values per coordinate",
                (Interval(float, 0.0, 0.5, closed="left"),), key=True), _VIEW),
         "coordinate-wise beta-trimmed mean (Yin et al. 2018); sees each update", _NO_CLAIM,
         default_claim=_NONE, sees="updates"),
    Spec("krum", "aggregator", Lazy("defenses.robust.aggregators:Krum"), (_F, _VIEW),
         "the update of smallest Krum score (Blanchard et al. 2017); sees pairwise distances", _NO_CLAIM,
         default_claim=_NONE, sees="distances"),
    Spec("multi-krum", "aggregator", Lazy("defenses.robust.aggregators:MultiKrum"),
         (_F, Param("m", "int", 0, "updates averaged, at most n - f (0: n - f)", _count), _VIEW),
         "mean of the m updates of smallest Krum score; sees pairwise distances", _NO_CLAIM,
         default_claim=_NONE, sees="distances"),
    Spec("norm-bound", "aggregator", Lazy("defenses.robust.aggregators:NormBound"),
         (Param("clip", "float", 1.0, "L2 bound of each update", _positive, key=True),
          Param("sigma", "float", 0.0, "std of Gaussian noise on the mean (Sun et al.'s weak DP; 0: none)",
                (Interval(float, 0.0, _LARGEST),)), _VIEW),
         "updates clipped to L2 norm clip, then the mean (Sun et al. 2019); a proven bound needs only the sum, "
         "so it composes with secagg", _NO_CLAIM,
         default_claim=_NONE, sees="sum"),
    Spec("fltrust", "aggregator", Lazy("defenses.robust.fltrust:FLTrust"),
         (Param("queries", "int", 10, "labelled training queries of the server's root set", (Interval(int, 1, None),),
                key=True), _VIEW),
         "trust scores ReLU(cos(update, root update)) from the server's own root set (Cao et al. 2021); "
         "sees each update", _NO_CLAIM,
         default_claim=_NONE, sees="updates"),
    Spec("shuffle", "aggregator", Lazy("defenses.shuffle:Shuffle"),
         (Param("n", "int", 1000, "cohort size the amplified claim assumes", (Interval(int, 2, None),)),
          Param("dp_delta", "float", 1e-6, "delta of the amplified (epsilon, delta) claim", _unit_open)),
         "anonymous shuffler: the server gets the cohort's messages without senders, in random order "
         "(threat model 'server (shuffled)'); follows a local randomizer (dp-local-laplace, rr)",
         "amplification by shuffling (Feldman, McMillan, Talwar 2021, Thm 3.1) of the local eps0, "
         "scope aggregate; eps0 (scope message) outside the theorem's condition",
         default_claim=_NONE, sees="updates"),
)}
