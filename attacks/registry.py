"""Attacks by name: a table of ``AttackSpec`` entries and ``make_attack(name, **params)`` for
the CLI, campaigns and the audit.

``reference=True`` marks the baselines that do not read the client's message (their
leakage against the counterfactual baseline is zero in expectation); nothing else decides
"baseline" (reports read the ``reference`` column of the attack rows). ``needs`` names what
the composition root passes the factory, from ``NEEDS``: ``seed`` (the run seed),
``algorithm`` (the audited algorithm object), ``k`` (its list length), ``noise`` (the defense
stack's noise model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from fltr_audit import plugins
from fltr_audit.base.lazy import lazy
from fltr_audit.constraints import ParameterError
from fltr_audit.errors import FltrError
from fltr_audit.plugins import call_plugin

if TYPE_CHECKING:
    from fltr_audit.engine.interfaces import Attack

NEEDS = ("seed", "algorithm", "k", "noise")


@dataclass(frozen=True)
class AttackSpec:
    """One registered attack: its name, how to build it, and what it needs."""

    name: str
    factory: Callable[..., Attack]
    reference: bool
    needs: tuple[str, ...]
    summary: str


def bayes_attack(algorithm: Any = None, noise: Any = None, prior: str = "click-model") -> Attack:
    """The Bayes attack for the algorithm's messages: ``BayesFedIPS`` for the update of an SGD
    pass over IPS-weighted hinge gradients (FedIPS, FedAvg), else ``Bayes`` (FPDGD weights,
    FOLtR-ES metric values)."""
    # start-up: the catalog imports no attack
    from attacks.bayes import Bayes
    from attacks.bayes_fedips import BayesFedIPS
    from fltr_audit.engine.algorithms.fedips import FedIPS

    if isinstance(algorithm, FedIPS):
        return BayesFedIPS(algorithm, noise, prior)
    return Bayes(algorithm, noise, prior=prior)


_OLSR, _HEURISTIC = "attacks.olsr:OLSR", "attacks.heuristics:Heuristic"
_BAYES, _DISTANCE = "attacks.registry:bayes_attack", "attacks.heuristics:distance_heuristic"

SPECS: tuple[AttackSpec, ...] = (
    AttackSpec("olsr", lazy(_OLSR), False, (), "least-squares regression of the update on the shown "
               "documents' gradients (Pham)"),
    AttackSpec("olsr-t", lazy(_OLSR, alpha=0.05), False, (),
               "olsr guessing only coefficients with a significant one-sided t-test"),
    AttackSpec("olsr-l1", lazy(_OLSR, loss="l1"), False, (), "olsr with least absolute deviations"),
    AttackSpec("bayes", lazy(_BAYES), False,
               ("algorithm", "noise"), "Bayes posterior of the clicks: replays the local step for every "
               "click vector (FedIPS: every count matrix), weighs it by the defense's noise density; "
               "reported as bayes-approx where it searches (B k > 14) or replays in a canonical order (FedIPS)"),
    AttackSpec("bayes-uniform",
               lazy(_BAYES, prior="uniform"),
               False, ("algorithm", "noise"), "bayes with a uniform prior over the click vectors: what the message "
               "alone tells (no labels, no click-model rates)"),
    AttackSpec("score", lazy(_HEURISTIC, kind="score"), False, (), "score change f'(d) - f(d) (Pham)"),
    AttackSpec("prob", lazy(_HEURISTIC, kind="prob"), False, (), "softmax probability change (Pham)"),
    AttackSpec("distance", lazy(_DISTANCE), False, ("k",), "pairwise score-distance count (Pham)"),
    AttackSpec("random3", lazy("attacks.random_k:RandomK", k=3), True, ("seed",),
               "3 shown documents at random (Pham's baseline)"),
    AttackSpec("random4", lazy("attacks.random_k:RandomK", k=4), True, ("seed",),
               "4 shown documents at random (Pham's baseline)"),
    AttackSpec("guess-all", lazy("attacks.reference:GuessAll"), True, (), "every shown document, one constant score"),
    AttackSpec("prior", lazy("attacks.reference:Prior"), True, (),
               "global model's score and list position only, no message (imputation baseline)"),
    AttackSpec("score-as-published", lazy(_HEURISTIC, kind="score", as_published=True), False, (),
               "score as in the published code (misaligned)"),
    AttackSpec("prob-as-published", lazy(_HEURISTIC, kind="prob", as_published=True), False, (),
               "prob as in the published code (misaligned)"),
    AttackSpec("distance-as-published", lazy(_DISTANCE, as_published=True), False, ("k",), "distance as in the published code"),
    AttackSpec("foltr-decode", lazy("attacks.foltr_decode:FoltrDecode"), False, ("k",),
               "FOLtR-ES: the first click a MaxRR value names"),
    AttackSpec("seed-replay", lazy("attacks.foltr_decode:SeedReplay", algorithm=None), False, ("algorithm",),
               "FOLtR-ES flawed seeding: replay the client's generator"),
)
ATTACK_SPECS: dict[str, AttackSpec] = {spec.name: spec for spec in SPECS}
ATTACKS = tuple(ATTACK_SPECS)
"""Every attack name, in the order reports list them."""
_PLUGINS: set[str] = set()


def register_attack(name: str, factory: Callable[..., Attack], *, reference: bool = False,
                    needs: tuple[str, ...] = (), summary: str = "plug-in", replace: bool = False) -> None:
    """Add the attack ``name``: ``factory(**params)`` returns an object with ``name`` and
    ``guess(view) -> Guess``; ``needs`` names what the audit passes it (from ``NEEDS``);
    ``reference`` marks a baseline that does not read the message."""
    if not callable(factory):
        raise FltrError(f"register_attack {name!r}: the factory is not callable")
    if name in ATTACK_SPECS and not replace:
        raise FltrError(f"register_attack: attack {name!r} is already registered")
    unknown = sorted(set(needs) - set(NEEDS))
    if unknown:
        raise FltrError(f"register_attack {name!r}: unknown needs {unknown} (choose from {', '.join(NEEDS)})")
    ATTACK_SPECS[name] = AttackSpec(name, factory, bool(reference), tuple(needs), summary)
    _PLUGINS.add(name)


def attack_names() -> tuple[str, ...]:
    """Every registered attack: built-ins, then plug-ins in registration order."""
    return tuple(ATTACK_SPECS)


def attack_needs(name: str) -> tuple[str, ...]:
    """What the attack ``name`` needs from the composition root (``NEEDS``)."""
    return attack_spec(name).needs


def is_reference(name: str) -> bool:
    """True for a baseline that does not read the message."""
    return attack_spec(name).reference


def attack_spec(name: str) -> AttackSpec:
    """The spec of ``name``; FltrError naming ``--attack`` for an unknown name."""
    if name not in ATTACK_SPECS:  # an installed plug-in of that name, loaded on first use
        factory = plugins.load(plugins.ATTACKS, name)
        if factory is None:
            raise ParameterError("attacks", f"unknown attack {name!r} (choose from {', '.join(ATTACK_SPECS)})")
        register_attack(name, factory, reference=bool(getattr(factory, "reference", False)),
                        needs=tuple(getattr(factory, "needs", ())))
    return ATTACK_SPECS[name]


def needed(name: str, available: Mapping[str, Any]) -> dict:
    """The entries of ``available`` (keys from ``NEEDS``) that attack ``name`` needs."""
    return {key: available[key] for key in attack_spec(name).needs if key in available}


def make_attack(name: str, **params: Any) -> Attack:
    """The attack called ``name`` with keyword ``params``.

    ``olsr`` / ``olsr-t`` / ``olsr-l1``: ``target`` ("update" | "weights"), ``global_regressor``
    (default True); ``olsr-t`` also ``alpha`` (default 0.05); ``distance``: ``k`` (threshold
    k // 2, default 5) or ``threshold``; ``random3`` / ``random4``: ``seed``; ``prior``: ``m``;
    ``bayes``: ``algorithm``, ``noise`` (an ``attacks.bayes_noise.NoiseModel``), ``prior``;
    ``bayes-uniform``: ``algorithm``, ``noise``.
    FltrError naming ``--attack`` for an unknown name or parameter; ParameterError naming the
    attack and the parameter for a bad value (``attack distance: threshold: ...``).
    """
    factory = attack_spec(name).factory
    if name in _PLUGINS:
        attack = call_plugin(f"attack plug-in {name!r} failed", factory, **params)
        if not callable(getattr(attack, "guess", None)):
            raise FltrError(f"attack plug-in {name!r} failed: its factory returned {type(attack).__name__}, "
                            "which has no guess(view) method")
        from attacks.plugin_attack import PluginAttack  # start-up: its checks import numpy

        return PluginAttack(name, attack)
    try:
        return factory(**params)
    except ParameterError as exc:  # a keyword of the attack, or (``attacks``) the attack itself refused
        raise (exc if exc.parameter == "attacks" else exc.within(f"attack {name}: ")) from None
    except TypeError as exc:
        raise ParameterError("attacks", f"{name}: bad parameters {sorted(params)} ({exc})") from None
