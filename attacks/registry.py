"""Attacks by name: ``make_attack(name, **params)`` for the CLI, campaigns and the audit."""

from __future__ import annotations

from typing import Any, Callable

from attacks.foltr_decode import FoltrDecode, SeedReplay
from attacks.heuristics import Heuristic
from attacks.olsr import OLSR
from attacks.random_k import RandomK
from fltr_audit.errors import FltrError
from fltr_audit.interfaces import Attack

_FACTORIES: dict[str, Callable[..., Attack]] = {
    "olsr": lambda **p: OLSR(**p),
    "olsr-t": lambda alpha=0.05, **p: OLSR(alpha=alpha, **p),
    "olsr-l1": lambda **p: OLSR(loss="l1", **p),
    "score": lambda **p: Heuristic("score", **p),
    "prob": lambda **p: Heuristic("prob", **p),
    "distance": lambda **p: Heuristic("distance", **p),
    "random3": lambda **p: RandomK(3, **p),
    "random4": lambda **p: RandomK(4, **p),
    "score-as-published": lambda **p: Heuristic("score", as_published=True, **p),
    "prob-as-published": lambda **p: Heuristic("prob", as_published=True, **p),
    "distance-as-published": lambda **p: Heuristic("distance", as_published=True, **p),
    "foltr-decode": lambda k=10, **p: FoltrDecode(k=k, **p),
    "seed-replay": lambda algorithm=None, **p: SeedReplay(algorithm, **p),
}
ATTACKS = tuple(_FACTORIES)
"""Every built-in attack name, in the order reports list them."""
_NEEDS: dict[str, tuple[str, ...]] = {"random3": ("seed",), "random4": ("seed",), "seed-replay": ("algorithm",),
                                      "foltr-decode": ("k",)}
_REFERENCE = {"random3", "random4"}
_PLUGINS: set[str] = set()
NEEDS = ("seed", "algorithm", "k", "noise")
"""What an attack may ask the composition root for (``needs``)."""


def register_attack(name: str, factory: Callable[..., Attack], *, reference: bool = False,
                    needs: tuple[str, ...] = (), replace: bool = False) -> None:
    """Add the attack ``name``: ``factory(**params)`` returns an object with ``name`` and
    ``guess(view) -> Guess``; ``needs`` names what the audit passes it (from ``NEEDS``);
    ``reference`` marks a baseline that does not read the message."""
    if not callable(factory):
        raise FltrError(f"register_attack {name!r}: the factory is not callable")
    if name in _FACTORIES and not replace:
        raise FltrError(f"register_attack: attack {name!r} is already registered")
    unknown = sorted(set(needs) - set(NEEDS))
    if unknown:
        raise FltrError(f"register_attack {name!r}: unknown needs {unknown} (choose from {', '.join(NEEDS)})")
    _FACTORIES[name] = factory
    _NEEDS[name] = tuple(needs)
    (_REFERENCE.add if reference else _REFERENCE.discard)(name)
    _PLUGINS.add(name)


def attack_needs(name: str) -> tuple[str, ...]:
    """What the attack ``name`` needs from the composition root (``NEEDS``)."""
    _find(name)
    return _NEEDS.get(name, ())


def is_reference(name: str) -> bool:
    """True for a baseline that does not read the message (random guessing)."""
    _find(name)
    return name in _REFERENCE


def attack_names() -> tuple[str, ...]:
    """Every registered attack: built-ins, then plug-ins in registration order."""
    return tuple(_FACTORIES)


def _find(name: str) -> Callable[..., Attack]:
    """The factory of ``name``, loading an installed plug-in of that name on first use."""
    if name not in _FACTORIES:
        from fltr_audit import plugins

        factory = plugins.load(plugins.ATTACKS, name)
        if factory is None:
            raise FltrError(f"--attack: unknown attack {name!r} (choose from {', '.join(_FACTORIES)})")
        register_attack(name, factory, reference=bool(getattr(factory, "reference", False)),
                        needs=tuple(getattr(factory, "needs", ())))
    return _FACTORIES[name]


def make_attack(name: str, **params: Any) -> Attack:
    """The attack called ``name`` with keyword ``params``.

    ``olsr`` / ``olsr-t`` / ``olsr-l1``: ``target`` ("update" | "weights"), ``global_regressor``
    (default True); ``olsr-t`` also ``alpha`` (default 0.05); heuristics: ``threshold`` (distance, default 5); ``random3`` /
    ``random4``: ``seed``. FltrError naming ``--attack`` for an unknown name or parameter.
    """
    factory = _find(name)
    if name in _PLUGINS:
        try:
            attack = factory(**params)
        except Exception as exc:  # a third-party factory's failure, named
            raise FltrError(f"attack plug-in {name!r} failed: {type(exc).__name__}: {exc}") from None
        if not callable(getattr(attack, "guess", None)):
            raise FltrError(f"attack plug-in {name!r} failed: its factory returned {type(attack).__name__}, "
                            "which has no guess(view) method")
        return attack
    try:
        return factory(**params)
    except TypeError as exc:
        raise FltrError(f"--attack {name}: bad parameters {sorted(params)} ({exc})") from None
