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

import warnings
from dataclasses import dataclass
from typing import Any

from defenses.catalog import SPECS, Param, Spec, format_value
from defenses.registration import plugin_spec
from defenses.clipping import Clip
from defenses.robust.compose import compose, is_rule
from fltr_audit.engine.aggregation import FedAvg, RoundDefenses
from fltr_audit.constraints import describe, satisfied
from fltr_audit.errors import FltrDeprecation, FltrError
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.privacy.mechanisms import check_declaration




@dataclass(frozen=True)
class DefenseStack(RoundDefenses):
    """Client defenses in order, the aggregator, and the canonical name (the engine applies it as
    ``RoundDefenses``); built fresh for each run."""

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
    if param.kind in ("float", "int") and not satisfied(value, param.constraints):
        raise FltrError(f"{where}: parameter {written}={raw} must be {describe(param.constraints)}")
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
        spec = plugin_spec(head)  # an installed plug-in, loaded on first use
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


@dataclass(frozen=True)
class Component:
    """One validated component of a stack: its catalog entry, every parameter's value (given,
    inherited from a preceding clip, or default) and its canonical text."""

    spec: Spec
    values: tuple[tuple[str, Any], ...]
    token: str

    def build(self) -> Any:
        """A fresh defense object of this component."""
        return self.spec.build(**dict(self.values), name=self.token)


def parse_defense(text: str) -> DefenseStack:
    """Parse and validate a defense stack; FltrError names the defense string on bad input."""
    return build_stack(parse_components(text))


def parse_components(text: str) -> tuple[Component, ...]:
    """The validated components of a defense string (``()`` for ``none``), building each once to
    check what it declares; FltrError names the defense string on bad input, and a deprecated
    parameter spelling warns (``FltrDeprecation``)."""
    text = str(text).strip()
    where = f"defense {text!r}"
    if not text:
        raise FltrError("defense '': empty (write 'none' for no defense)")
    if text == "none":
        return ()
    components: list[Component] = []
    last_clip: Clip | None = None
    deprecated: list[str] = []
    for raw in _split(text, "+"):
        if raw == "none":
            raise FltrError(f"{where}: 'none' cannot be combined with other defenses")
        spec, given, aliases = _component(raw, text)
        aggregators = [c for c in components if c.spec.role == "aggregator"]
        if aggregators and (spec.role != "aggregator" or len(aggregators) == 2):
            raise FltrError(f"{where}: {components[-1].token} must come last, and only one aggregator is allowed")
        deprecated += [f"{spec.name} parameter {alias!r} is deprecated: write {name!r}" for alias, name in aliases]
        values, shown = {}, []
        for p in spec.params:
            default = p.inherit(last_clip) if p.inherit and last_clip is not None else p.default
            values[p.name] = given.get(p.name, default)
            if p.key or values[p.name] != default:
                shown.append(f"{p.name}={format_value(values[p.name])}")
        component = Component(spec, tuple(values.items()), spec.name + (f"({','.join(shown)})" if shown else ""))
        try:
            obj = component.build()
        except FltrError as exc:
            raise FltrError(f"{where}: {str(exc).removeprefix(component.token + ': ')}") from None
        check_declaration(obj, spec.role)  # an unknown or impossible declared mechanism, named
        components.append(component)
        last_clip = obj if isinstance(obj, Clip) else last_clip
    if sum(c.spec.role == "aggregator" for c in components) == 2 and is_rule(components[-1].build()) \
            and not is_rule(components[-2].build()):
        components[-2:] = components[:-3:-1]  # canonical: a robust rule first, in either order written
    build_stack(tuple(components), where)  # the aggregator's checks against the client defenses
    if deprecated:  # warned from this one line, so Python's default filter shows each message once
        name = "+".join(c.token for c in components)
        warnings.warn(f"{where}: {'; '.join(deprecated)} (canonical name {name})", FltrDeprecation)
    return tuple(components)


def build_stack(components: tuple[Component, ...], where: str = "defense") -> DefenseStack:
    """A fresh stack of validated ``components`` (``parse_components``): new objects every call."""
    if not components:
        return DefenseStack(client=(), aggregator=FedAvg(), name="none")
    client = [c.build() for c in components if c.spec.role != "aggregator"]
    aggregators = [c.build() for c in components if c.spec.role == "aggregator"]
    aggregator = compose(*aggregators, where) if len(aggregators) == 2 else (aggregators or [None])[0]
    if hasattr(aggregator, "after"):  # an aggregator whose claim rests on the client defenses (shuffle)
        try:
            aggregator = aggregator.after(tuple(client))
        except FltrError as exc:
            raise FltrError(f"{where}: {str(exc).removeprefix(aggregator.name + ': ')}") from None
    return DefenseStack(client=tuple(client), aggregator=aggregator or FedAvg(),
                        name="+".join(c.token for c in components))
