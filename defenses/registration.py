"""Defenses added from outside the project: ``register_defense`` (also behind the
``fltr_audit.defenses`` entry-point group) turns a factory into a ``stack.Spec``, so that the
defense-string grammar, canonical names and ``defenses list`` treat it like a built-in one."""

from __future__ import annotations

import copy
import inspect
import typing
from typing import Any, Callable

import numpy as np

from defenses.catalog import SPECS, Param, Spec
from fltr_audit import plugins
from fltr_audit.errors import FltrError
from fltr_audit.base.defense_terms import ROLES, SEES, PrivacyClaim, Privatizes
from fltr_audit.engine.interfaces import Aggregate, AggregatorBase
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.engine.messages import Messages
from fltr_audit.plugins import call_plugin, returned

PRIVATIZES = typing.get_args(Privatizes)

_KINDS = {bool: "choice", int: "int", float: "float", str: "str"}


def _params(factory: Callable[..., Any], name: str) -> tuple[Param, ...]:
    """One ``Param`` per keyword of ``factory`` with a number or text default (the first is the key)."""
    params = []
    for p in inspect.signature(factory).parameters.values():
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name == "name":
            continue
        if p.default is inspect.Parameter.empty or type(p.default) not in _KINDS:
            raise FltrError(f"register_defense {name!r}: parameter {p.name!r} needs a number or text default")
        kind = _KINDS[type(p.default)]
        choices = ("True", "False") if type(p.default) is bool else ()
        params.append(Param(p.name, kind, str(p.default) if choices else p.default, p.name, choices=choices,
                            key=not params))
    return tuple(params)


class _PluginDefense:
    """A plug-in's defense behind the project's boundary: its transform runs through
    ``fltr_audit.plugins.call_plugin`` and the type of its result is checked; every other attribute
    (its claim, declared mechanism, ...) is the plug-in object's own. A copy copies the plug-in
    object (a stateful aggregator copied per trial stays apart)."""

    def __init__(self, defense: Any, name: str, plugin: str) -> None:
        self.__dict__.update(wrapped=defense, name=name, _plugin=plugin)

    wrapped: Any
    """The plug-in's own defense object."""

    def __getattr__(self, attr: str) -> Any:
        if "wrapped" not in self.__dict__:  # half-built (copying, unpickling)
            raise AttributeError(attr)
        return getattr(self.__dict__["wrapped"], attr)

    def __copy__(self) -> "_PluginDefense":
        return type(self)(copy.copy(self.wrapped), self.name, self._plugin)

    def __deepcopy__(self, memo: dict) -> "_PluginDefense":
        return type(self)(copy.deepcopy(self.wrapped, memo), self.name, self._plugin)


class PluginClientDefense(_PluginDefense):
    """A client-side plug-in defense: ``apply`` must return ``Messages``. ``privatizes`` is the
    plug-in's declaration, ``"vector"`` when it declares none (checked when it is built)."""

    def __init__(self, defense: Any, name: str, plugin: str) -> None:
        super().__init__(defense, name, plugin)
        privatizes = getattr(defense, "privatizes", "vector")
        if privatizes not in PRIVATIZES:
            raise FltrError(f"defense plug-in {plugin!r} failed: privatizes = {privatizes!r}, "
                            f"expected one of {', '.join(PRIVATIZES)}")
        self.__dict__["privatizes"] = privatizes

    def apply(self, messages: Messages, global_params: np.ndarray, rng: np.random.Generator) -> Messages:
        """The plug-in's ``apply``; FltrError naming it for anything but ``Messages``."""
        out = call_plugin(f"defense plug-in {self._plugin!r} failed in apply()", self.wrapped.apply, messages,
                          global_params, rng)
        return returned(f"defense plug-in {self._plugin!r}: apply()", out, Messages)


class PluginAggregator(_PluginDefense, AggregatorBase):
    """A plug-in aggregator: ``aggregate`` must return an ``Aggregate``. What it declares
    (``AggregatorBase``: ``reads_global_model``, ``min_cohort``, ``sees``, ``robust_rule``) is read
    from the plug-in's object once, checked, with the base's values where it declares nothing, and
    ``sees = "sum"`` where it declares a secure-sum mechanism."""

    def __init__(self, defense: Any, name: str, plugin: str) -> None:
        super().__init__(defense, name, plugin)
        secure_sum = isinstance(mech.declared(defense), (mech.DiscreteGaussianSum, mech.QuantizedSum))
        declared = {"reads_global_model": getattr(defense, "reads_global_model", False),
                    "min_cohort": getattr(defense, "min_cohort", 1),
                    "sees": getattr(defense, "sees", "sum" if secure_sum else "updates"),
                    "robust_rule": getattr(defense, "robust_rule", False)}
        if not (isinstance(declared["reads_global_model"], bool) and isinstance(declared["robust_rule"], bool)
                and isinstance(declared["min_cohort"], int) and declared["min_cohort"] >= 1
                and declared["sees"] in SEES):
            raise FltrError(f"defense plug-in {plugin!r} failed: it declares {declared}; expected booleans, "
                            f"min_cohort >= 1 and sees in {', '.join(SEES)}")
        self.__dict__.update(declared)

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator,
                  **extra: Any) -> Aggregate:
        """The plug-in's ``aggregate``; FltrError naming it for anything but an ``Aggregate``."""
        out = call_plugin(f"defense plug-in {self._plugin!r} failed in aggregate()", self.wrapped.aggregate, messages,
                          participants, rng, **extra)
        return returned(f"defense plug-in {self._plugin!r}: aggregate()", out, Aggregate)


def register_defense(name: str, factory: Callable[..., Any], role: str = "client", *, guarantee: str = "",
                     summary: str = "", replace: bool = False) -> Spec:
    """Add the defense ``name`` to the stack grammar.

    ``factory(**params)`` returns a client defense (``apply(messages, global_params, rng)``) or,
    with ``role="aggregator"``, an aggregator (``aggregate(messages, participants, rng)``); either
    carries the ``claim`` (``PrivacyClaim``) it makes. Its keyword parameters (with number or
    text defaults) become the component's parameters, ``name(key=value,...)``; the first is
    always written in the canonical name. ``guarantee`` states the claim in words.
    """
    if role not in ROLES:
        raise FltrError(f"register_defense {name!r}: role {role!r} must be one of {', '.join(ROLES)}")
    if not callable(factory):
        raise FltrError(f"register_defense {name!r}: the factory is not callable")
    if (name in SPECS or name == "none") and not replace:
        raise FltrError(f"register_defense: defense {name!r} is already registered")
    method = "apply" if role == "client" else "aggregate"

    def build(name: str = name, **values: Any) -> Any:
        values = {k: (v == "True" if isinstance(v, str) and v in ("True", "False") else v) for k, v in values.items()}
        obj = call_plugin(f"defense plug-in {spec.name!r} failed", factory, **values)
        if not callable(getattr(obj, method, None)) or not isinstance(getattr(obj, "claim", None), PrivacyClaim):
            raise FltrError(f"defense plug-in {spec.name!r} failed: its factory returned {type(obj).__name__}, "
                            f"which needs a {method}() method and a PrivacyClaim 'claim'")
        obj.name = name  # the canonical component name, as built-in defenses carry it
        return (PluginClientDefense if role == "client" else PluginAggregator)(obj, name, spec.name)

    spec = Spec(name, role, build, _params(factory, name), summary or (inspect.getdoc(factory) or "").split("\n")[0],
                guarantee or "as the plug-in states")
    SPECS[name] = spec
    return spec


def plugin_spec(name: str) -> Spec | None:
    """The spec of an installed ``fltr_audit.defenses`` plug-in called ``name`` (registered on
    first use), or None. The entry point names a factory; its optional attributes ``role``,
    ``guarantee`` and ``summary`` declare the rest."""
    factory = plugins.load(plugins.DEFENSES, name)
    if factory is None:
        return None
    return register_defense(name, factory, getattr(factory, "role", "client"),
                            guarantee=getattr(factory, "guarantee", ""), summary=getattr(factory, "summary", ""))
