"""The poisoning attacks by name: their parameters (``fltr_audit.constraints``), the message kinds
each can be written in, and ``build`` -- a fresh attack for one run from its ``PoisonSpec``.

Every attack takes ``fraction`` (required, in [0, 0.5): malicious members stay a minority) and
``who`` (``fixed`` | ``round``, ``selection``); every other parameter has a default. An attack
applies to an algorithm whose message kind it ``carries`` (``data-poison``: whose type passes each
user to its click model, ``user_clicks``); ``check_applies`` refuses the rest in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from attacks.poisoning.domains import ALL_KINDS, CLICKS, DIRECTIONS, WHO
from fltr_audit.base.lazy import lazy
from fltr_audit.constraints import Interval, Options, Parameter, ParameterError, validate

_VECTORS = ("weights", "update")
_POSITIVE = (Interval(float, 0.0, 1e6, closed="right"),)
FRACTION = Parameter("fraction", None, (Interval(float, 0.0, 0.5, closed="left"),),
                     "share of each cohort that is malicious, floor(fraction n) members")
WHO_PARAM = Parameter("who", "fixed", (Options(WHO),), "fixed: the same users whenever they take part; "
                                                       "round: drawn afresh each round")


@dataclass(frozen=True)
class PoisonAttack:
    """One poisoning attack: name, factory, its own parameters, the message kinds it can be written
    in, whether it needs per-user clicks, a summary and its reference."""

    name: str
    build: Callable[..., Any]
    params: tuple[Parameter, ...]
    carries: tuple[str, ...]
    user_clicks: bool
    summary: str
    reference: str

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        """Every parameter: ``fraction``, ``who``, then the attack's own."""
        return (FRACTION, WHO_PARAM) + self.params


POISONS: dict[str, PoisonAttack] = {a.name: a for a in (
    PoisonAttack("data-poison", lazy("attacks.poisoning.data:DataPoison"),
                 (Parameter("click", "inverted", (Options(CLICKS),), "the malicious users' click model"),),
                 ALL_KINDS, True, "malicious users click by an inverted click model (no stopping)",
                 "Wang & Zuccon ICTIR 2023; Unlearning-for-FOLTR runs/train.py"),
    PoisonAttack("sign-flip", lazy("attacks.poisoning.model:SignFlip"), (Parameter("scale", 1.0, _POSITIVE, "s: send -s times the own update"),),
                 ALL_KINDS, False, "the own update negated and scaled (FOLtR-ES: metric 1 - f)",
                 "e.g. Li et al. AAAI 2019 (RSA)"),
    PoisonAttack("scale", lazy("attacks.poisoning.model:Scale"), (Parameter("factor", 10.0, _POSITIVE, "l: send l times the own update"),),
                 ALL_KINDS, False, "the own update boosted (FOLtR-ES: metric times l)",
                 "Bagdasaryan et al. AISTATS 2020"),
    PoisonAttack("noise", lazy("attacks.poisoning.model:Noise"), (Parameter("std", 1.0, _POSITIVE, "std of the Gaussian noise added"),),
                 ALL_KINDS, False, "Gaussian noise added to the own update (FOLtR-ES: to the metric)",
                 "Wang et al. ECIR 2024"),
    PoisonAttack("lie", lazy("attacks.poisoning.model:LIE"), (Parameter("z", None, (Interval(float, 0.0, 100.0), None),
                                        "mu - z sigma; default Baruch et al.'s z_max for the cohort"),),
                 _VECTORS, False, "mean minus z standard deviations of the benign updates",
                 "Baruch et al. NeurIPS 2019"),
    PoisonAttack("ipm", lazy("attacks.poisoning.model:IPM"), (Parameter("epsilon", 0.5, _POSITIVE, "send -epsilon times the benign mean"),),
                 _VECTORS, False, "inner product manipulation: the benign mean negated and scaled",
                 "Xie et al. UAI 2019"),
    PoisonAttack("adaptive", lazy("attacks.poisoning.adaptive:Adaptive"),
                 (Parameter("direction", "std", (Options(DIRECTIONS),), "perturbation direction"),
                  Parameter("max_gamma", 10.0, _POSITIVE, "largest perturbation searched"),
                  Parameter("steps", 20, (Interval(int, 1, 60),), "grid points max_gamma 2^-j")),
                 _VECTORS, False, "mean + gamma p with gamma maximizing the deviation of the aggregator faced",
                 "Shejwalkar & Houmansadr NDSS 2021"),
)}


def poison_attack(name: str) -> PoisonAttack:
    """The attack ``name``; ParameterError naming ``poison`` for an unknown one."""
    if name not in POISONS:
        raise ParameterError("poison", f"unknown poisoning attack {name!r} (choose from none, {', '.join(POISONS)})")
    return POISONS[name]


def check_params(name: str, values: dict[str, Any]) -> dict[str, Any]:
    """Every parameter of ``name`` checked against its declaration (ParameterError naming
    ``poison``); returns the values with the defaults filled in."""
    attack = poison_attack(name)
    if "fraction" not in values:
        raise ParameterError("poison", f"{name} needs fraction=F, the malicious share of each cohort in [0, 0.5)")
    try:
        validate(values, attack.parameters)
    except ParameterError as exc:
        raise ParameterError("poison", f"{name}: {exc}") from None
    return {p.name: values.get(p.name, p.default) for p in attack.parameters}


def check_applies(name: str, algorithm: str, message_kind: str, user_clicks: bool) -> None:
    """ParameterError naming ``poison`` when ``algorithm``'s messages (``message_kind``) cannot carry
    the attack, or it needs per-user clicks the algorithm does not simulate."""
    attack = poison_attack(name)
    if attack.user_clicks and not user_clicks:
        raise ParameterError("poison", f"{name}: {algorithm} does not simulate per-user clicks, so its malicious "
                                       "users cannot click by another model")
    if message_kind not in attack.carries:
        raise ParameterError("poison", f"{name}: {algorithm}'s messages carry {message_kind}, which it cannot write "
                                       f"(it writes {', '.join(attack.carries)})")


def build(name: str, values: dict[str, Any], *, seed: int, n_levels: int, label: str) -> Any:
    """A fresh attack for one run: ``values`` as ``check_params`` returns them, the run ``seed``, the
    data's relevance levels (data poisoning), ``label`` its canonical name."""
    kwargs = dict(values)
    if name == "data-poison":
        kwargs["n_levels"] = n_levels
    return poison_attack(name).build(seed=seed, name=label, **kwargs)


def list_poisonings() -> list[dict]:
    """Every poisoning attack as a row of ``attacks list`` (kind ``poisoning``)."""
    return [{"name": a.name, "kind": "poisoning", "summary": a.summary, "paper": a.reference,
             "carries": list(a.carries) + (["per-user clicks"] if a.user_clicks else []),
             "parameters": [{"name": p.name, "default": p.default, "help": p.help} for p in a.parameters]}
            for a in POISONS.values()]
