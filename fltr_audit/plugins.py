"""Plug-ins from installed packages: the entry-point groups ``fltr_audit.attacks``,
``fltr_audit.defenses`` and ``fltr_audit.engine.algorithms`` (``importlib.metadata``).

A package adds its own attack, defense or algorithm by declaring, in its ``pyproject.toml``::

    [project.entry-points."fltr_audit.attacks"]
    my-attack = "my_package.attacks:my_attack"          # a factory (see fltr_audit.api.register_attack)

    [project.entry-points."fltr_audit.defenses"]
    my-defense = "my_package.defenses:MY_DEFENSE"        # a fltr_audit.api.DefensePlugin

    [project.entry-points."fltr_audit.engine.algorithms"]
    my-algo = "my_package.algo:SPEC"                     # a fltr_audit.engine.algorithms.registry.AlgorithmSpec

Entry points load lazily: only when a command asks for that name, so a broken plug-in never
breaks a command that does not use it. A plug-in that does not load gives one line naming it
and the cause (``FltrError``; exit code 2 from the CLI).
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from fltr_audit.errors import FltrError

ATTACKS = "fltr_audit.attacks"
DEFENSES = "fltr_audit.defenses"
ALGORITHMS = "fltr_audit.engine.algorithms"
GROUPS = (ATTACKS, DEFENSES, ALGORITHMS)


def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    """The installed entry points of ``group`` by name (nothing is imported)."""
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def installed(group: str) -> dict[str, str]:
    """The entry-point names of ``group`` with the distribution that declares each ("" when
    unknown); nothing is imported."""
    return {name: (ep.dist.name if getattr(ep, "dist", None) is not None else "")
            for name, ep in entry_points(group).items()}


def load(group: str, name: str) -> Any | None:
    """The object the entry point ``name`` of ``group`` names, or None when no package declares it.

    FltrError naming the plug-in and the cause when it is declared but does not load.
    """
    ep = entry_points(group).get(name)
    if ep is None:
        return None
    try:
        return ep.load()
    except Exception as exc:  # any import-time failure of third-party code is the plug-in's
        raise FltrError(f"plug-in {name!r} ({group} = {ep.value}) does not load: "
                        f"{type(exc).__name__}: {exc}") from None


def describe_failure(kind: str, name: str, exc: BaseException) -> FltrError:
    """The one-line error for a plug-in ``kind`` (attack, defense, algorithm) whose factory raised."""
    return FltrError(f"{kind} plug-in {name!r} failed: {type(exc).__name__}: {exc}")
