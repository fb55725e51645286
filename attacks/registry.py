"""Attacks by name: ``make_attack(name, **params)`` for the CLI, campaigns and the audit."""

from __future__ import annotations

from typing import Any, Callable

from attacks.bayes import Bayes
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
    "bayes": lambda algorithm=None, noise=None, **p: Bayes(algorithm, noise, **p),
}
NEEDS = {"bayes": ("algorithm", "noise")}
"""What the composition root passes an attack beyond its own parameters (PLAN: AttackSpec.needs)."""
ATTACKS = tuple(_FACTORIES)
"""Every attack name, in the order reports list them."""


def make_attack(name: str, **params: Any) -> Attack:
    """The attack called ``name`` with keyword ``params``.

    ``olsr`` / ``olsr-t`` / ``olsr-l1``: ``target`` ("update" | "weights"), ``global_regressor``
    (default True); ``olsr-t`` also ``alpha`` (default 0.05); heuristics: ``threshold`` (distance, default 5); ``random3`` /
    ``random4``: ``seed``; ``bayes``: ``algorithm``, ``noise`` (an ``attacks.bayes.NoiseModel``), ``prior``. FltrError naming ``--attack`` for an unknown name or parameter.
    """
    if name not in _FACTORIES:
        raise FltrError(f"--attack: unknown attack {name!r} (choose from {', '.join(ATTACKS)})")
    try:
        return _FACTORIES[name](**params)
    except TypeError as exc:
        raise FltrError(f"--attack {name}: bad parameters {sorted(params)} ({exc})") from None
