"""Defense stacks written as strings, e.g. ``clip(sensitivity=5)+dp-distributed(eps=4.5)+secagg``.

Grammar: ``none`` or components joined by ``+``; a component is ``name`` or
``name(key=value,...)``; a list value is written ``[a,b,c]``. Client defenses apply in the
order written; a secure-aggregation component, if any, comes last. The canonical name always
writes a component's key parameter (clip's sensitivity, the noise level eps / sigma / p), drops
other parameters equal to their default and formats numbers with ``%.12g``, so equal stacks get
equal names. A noise defense without its own sensitivity takes it from the nearest ``clip``
before it (``dp-distributed``/``dp-local-laplace``: sensitivity; ``dp-gaussian``: clip =
sensitivity/2). ``delta`` is the deprecated alias of ``sensitivity`` (clip, dp-distributed,
dp-local-laplace): it parses to the same stack and warns (``FltrDeprecation``), so that
``delta`` elsewhere means the DP delta only.
"""

from __future__ import annotations

import math
import warnings
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
from fltr_audit.aggregation import FedAvg
from fltr_audit.errors import FltrDeprecation, FltrError
from fltr_audit.mechanisms import check_declaration
from fltr_audit.interfaces import Aggregator, ClientDefense, PrivacyClaim, Role


def _fmt(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ",".join(_fmt(v) for v in value) + "]"
    if isinstance(value, float):
        return format(value, ".12g")
    return str(value)


@dataclass(frozen=True)
class Param:
    """One parameter: its type (``float``, ``int``, ``choice``, ``values``), default, a check
    returning an error text or None, where a default is inherited from a preceding clip,
    whether it is a ``key`` parameter, always written in the canonical name, and a deprecated
    ``alias`` still accepted (with a warning) in place of ``name``."""

    name: str
    kind: str
    default: Any
    help: str
    check: Callable[[Any], str | None] = lambda v: None
    choices: tuple[str, ...] = ()
    inherit: Callable[[Clip], Any] | None = None
    key: bool = False
    alias: str | None = None


@dataclass(frozen=True)
class Spec:
    name: str
    role: Role
    build: Callable[..., Any]
    params: tuple[Param, ...]
    summary: str
    guarantee: str


_LARGEST = 1e100  # larger values overflow squares and sums of squares into inf / NaN


def _positive(v: float) -> str | None:
    return None if 0 < v <= _LARGEST else f"must be a positive number at most {_LARGEST:g}"


def _unit_open(v: float) -> str | None:
    return None if 0 < v < 1 else "must lie strictly between 0 and 1"


def _rate(v: float) -> str | None:
    return None if 0 <= v < 1 else "must lie in [0, 1)"


def _degree(v: int) -> str | None:
    return None if v >= 0 and v % 2 == 0 else "must be 0 (complete graph) or an even number >= 2"


def _bits(v: int) -> str | None:
    return None if 16 <= v <= 64 else "must lie in 16..64"


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
         (_EPS, _SENSITIVITY, Param("norm", "choice", "l1", "clip norm (l2: the published variant)", choices=NORMS)),
         "clip the update to norm Delta/2, add Laplace(Delta/eps) per coordinate",
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
          Param("bits", "int", 20, "modular secure aggregation in Z_(2^bits)", lambda v: None if 2 <= v <= 62
                else "must lie in 2..62"),
          Param("n", "int", 1000, "cohort size the scale and the claim are computed for", lambda v: None if v >= 1
                else "must be a positive integer"),
          Param("dim", "int", 64, "padded dimension (a power of two >= the model's parameters)",
                lambda v: None if v >= 1 and v & (v - 1) == 0 else "must be a power of two"),
          Param("dp_delta", "float", 1e-5, "delta of the (epsilon, delta) claim", _unit_open),
          Param("secagg", "choice", "sum", "the modular sum: exact numpy sum, or the Bonawitz protocol",
                choices=("sum", "protocol"))),
         "distributed discrete Gaussian (Kairouz, Liu, Steinke 2021): clip, rotate, scale, conditional "
         "randomized rounding, per-client discrete Gaussian shares, modular secure sum in Z_(2^bits)",
         "the paper's zCDP bound for the cohort n, as (epsilon, dp_delta) per round, scope aggregate"),
    Spec("shuffle", "aggregator", Shuffle,
         (Param("n", "int", 1000, "cohort size the amplified claim assumes", lambda v: None if v >= 2
                else "must be at least 2"),
          Param("dp_delta", "float", 1e-6, "delta of the amplified (epsilon, delta) claim", _unit_open)),
         "anonymous shuffler: the server gets the cohort's messages without senders, in random order "
         "(threat model 'server (shuffled)'); follows a local randomizer (dp-local-laplace, rr)",
         "amplification by shuffling (Feldman, McMillan, Talwar 2021, Thm 3.1) of the local eps0, "
         "scope aggregate; eps0 (scope message) outside the theorem's condition"),
)}


@dataclass(frozen=True)
class DefenseStack:
    """Client defenses in order, the aggregator, and the canonical name."""

    client: tuple[ClientDefense, ...]
    aggregator: Aggregator
    name: str

    @property
    def claim(self) -> PrivacyClaim:
        """The strongest claim of the stack: the smallest epsilon among message-scope claims
        (a later local mechanism is post-processing of an earlier one and vice versa), else the
        smallest among aggregate-scope ones, else none; behind a shuffler, the shuffler's claim
        (which is computed from the local randomizer's)."""
        if getattr(self.aggregator, "covers_client_defenses", False):
            return self.aggregator.claim  # a shuffler's amplified claim covers the local randomizer
        claims = [d.claim for d in self.client] + [self.aggregator.claim]
        for scope in ("message", "aggregate"):
            scoped = [c for c in claims if c.scope == scope]
            if scoped:
                return min(scoped, key=lambda c: (c.epsilon, c.delta))
        return PrivacyClaim()


def _split(text: str, sep: str) -> list[str]:
    """Split at ``sep`` outside parentheses and brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "(["
        depth -= ch in ")]"
        if ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _convert(param: Param, raw: str, where: str, written: str) -> Any:
    """``raw`` as the parameter's type; errors name the parameter as ``written`` (name or alias)."""
    try:
        if param.kind == "float":
            value = float(raw)
        elif param.kind == "int":
            value = int(raw)
        elif param.kind == "values":
            if not (raw.startswith("[") and raw.endswith("]")):
                raise ValueError
            value = tuple(sorted(float(v) for v in raw[1:-1].split(",")))
        else:
            value = raw
    except ValueError:
        kind = "list of numbers such as [0,0.5,1]" if param.kind == "values" else param.kind
        raise FltrError(f"{where}: parameter {written}={raw!r} is not a valid {kind}") from None
    if param.kind == "choice" and value not in param.choices:
        raise FltrError(f"{where}: parameter {written}={raw!r} must be one of {', '.join(param.choices)}")
    problem = param.check(value) if param.kind in ("float", "int") else None
    if problem:
        raise FltrError(f"{where}: parameter {written}={raw} {problem}")
    return value


def _component(token: str, text: str) -> tuple[Spec, dict[str, Any], list[tuple[str, str]]]:
    """The spec of one component, its given parameters (by name) and the deprecated aliases
    used, as (alias, name) pairs."""
    where = f"defense {text!r}"
    head, _, rest = token.partition("(")
    head = head.strip()
    if rest and not rest.endswith(")"):
        raise FltrError(f"{where}: malformed component {token!r} (expected name(key=value,...))")
    spec = SPECS.get(head)
    if spec is None:
        from defenses.registration import plugin_spec  # an installed plug-in, loaded on first use

        spec = plugin_spec(head)
    if spec is None:
        raise FltrError(f"{where}: unknown defense {head!r} (choose from none, {', '.join(SPECS)})")
    params = {p.name: p for p in spec.params}
    aliases = {p.alias: p.name for p in spec.params if p.alias}
    given: dict[str, Any] = {}
    spelled: dict[str, str] = {}  # parameter name -> as written (its name or its alias)
    for item in _split(rest[:-1], ",") if rest[:-1].strip() else []:
        written, eq, raw = item.partition("=")
        written = written.strip()
        key = aliases.get(written, written)
        if not eq or key not in params:
            raise FltrError(f"{where}: {head} has no parameter {written!r} (parameters: {', '.join(params)})")
        if key in given and spelled[key] != written:
            raise FltrError(f"{where}: {head} parameter {key!r} given twice (as {key!r} and as its deprecated "
                            f"alias {params[key].alias!r}); give {key!r} only")
        if key in given:
            raise FltrError(f"{where}: {head} parameter {key!r} given twice")
        spelled[key] = written
        given[key] = _convert(params[key], raw.strip(), where, written)
    return spec, given, [(w, k) for k, w in spelled.items() if w != k]


def parse_defense(text: str) -> DefenseStack:
    """Parse and validate a defense stack; FltrError names the defense string on bad input."""
    text = str(text).strip()
    where = f"defense {text!r}"
    if text in ("", "none"):
        return DefenseStack(client=(), aggregator=FedAvg(), name="none")
    client: list[Any] = []
    aggregator: Any = None
    tokens: list[str] = []
    last_clip: Clip | None = None
    deprecated: list[str] = []
    for raw in _split(text, "+"):
        if raw == "none":
            raise FltrError(f"{where}: 'none' cannot be combined with other defenses")
        if aggregator is not None:
            raise FltrError(f"{where}: {tokens[-1]} must come last, and only one aggregator is allowed")
        spec, given, aliases = _component(raw, text)
        deprecated += [f"{spec.name} parameter {alias!r} is deprecated: write {name!r}" for alias, name in aliases]
        values, shown = {}, []
        for p in spec.params:
            default = p.inherit(last_clip) if p.inherit and last_clip is not None else p.default
            values[p.name] = given.get(p.name, default)
            if p.key or values[p.name] != default:
                shown.append(f"{p.name}={_fmt(values[p.name])}")
        token = spec.name + (f"({','.join(shown)})" if shown else "")
        try:
            obj = spec.build(**values, name=token)
        except FltrError as exc:
            raise FltrError(f"{where}: {str(exc).removeprefix(token + ': ')}") from None
        check_declaration(obj, spec.role)  # an unknown or impossible declared mechanism, named
        tokens.append(token)
        if spec.role == "aggregator":
            aggregator = obj
        else:
            client.append(obj)
            last_clip = obj if isinstance(obj, Clip) else last_clip
    if hasattr(aggregator, "after"):  # an aggregator whose claim rests on the client defenses (shuffle)
        try:
            aggregator = aggregator.after(tuple(client))
        except FltrError as exc:
            raise FltrError(f"{where}: {str(exc).removeprefix(aggregator.name + ': ')}") from None
    stack = DefenseStack(client=tuple(client), aggregator=aggregator or FedAvg(), name="+".join(tokens))
    if deprecated:  # warned from this one line, so Python's default filter shows each message once
        warnings.warn(f"{where}: {'; '.join(deprecated)} (canonical name {stack.name})", FltrDeprecation)
    return stack


def list_defenses() -> list[dict]:
    """Every defense with its role, parameters (defaults), summary, claimed guarantee and the
    claim it makes with default parameters."""
    rows = []
    for spec in SPECS.values():
        claim = spec.build(**{p.name: p.default for p in spec.params}, name=spec.name).claim
        rows.append({
            "name": spec.name, "role": spec.role, "summary": spec.summary, "guarantee": spec.guarantee,
            "parameters": [{"name": p.name, "default": "maxrr" if p.default is MAXRR_VALUES else _fmt(p.default),
                            "help": p.help,
                            **({"choices": list(p.choices)} if p.choices else {}),
                            **({"inherits": "from a preceding clip"} if p.inherit else {}),
                            **({"deprecated_alias": p.alias} if p.alias else {})} for p in spec.params],
            "default_claim": {"epsilon": claim.epsilon, "delta": claim.delta, "scope": claim.scope},
        })
    return rows
