"""One constraint language for parameters, in the spirit of scikit-learn's ``Interval`` /
``StrOptions`` / ``validate_params``.

A parameter declares a tuple of constraints; a value is valid when it satisfies any of them
(``None`` in the tuple admits None). A failed check raises ``ParameterError`` naming the
parameter as the engine calls it (``probe.cohort``, ``lr``); each door renames it once with
``ParameterError.renamed`` -- the CLI to its option (``--probe-cohort``), the campaign reader to
its key -- so each user is told about what they typed::

    check("probe.cohort", 0, (Interval(int, 1, None),))
    # ParameterError: probe.cohort: must be an integer in [1, inf), got 0
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from fltr_audit.errors import FltrError


class ParameterError(FltrError):
    """A parameter's value breaks its constraints; ``parameter`` names it, ``problem`` says how.

    The engine names the parameter as its Python caller typed it (``trials``, ``probe.cohort``);
    ``door`` is False until a front end has renamed it for its own user (``renamed``)."""

    def __init__(self, parameter: str, problem: str, where: str = "") -> None:
        self.parameter, self.problem, self.where, self.door = parameter, problem, where, False
        super().__init__(f"{where}{parameter}: {problem}")

    def within(self, where: str) -> "ParameterError":
        """The same error said inside ``where`` (``"attack olsr: "``): a parameter of that object,
        which no door renames."""
        return ParameterError(self.parameter, self.problem, where + self.where)

    def renamed(self, names: Mapping[str, str], where: str = "", form: str = "{}") -> "ParameterError":
        """The error as a door says it, once: ``names`` maps the engine's name to what the
        door's user typed (unmapped names stay), written by ``form`` after ``where`` (the
        campaign reader: ``where="c.toml: ", form="key '{}'"``); ``door`` is then True. A parameter
        said ``within`` an object keeps its name."""
        name = self.parameter if self.where else names.get(self.parameter, self.parameter)
        error = ParameterError(form.format(name), self.problem, where + self.where)
        error.parameter, error.door = name, True
        return error


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _bound(value: float | None, sign: str) -> str:
    return f"{sign}inf" if value is None else format(value, "g") if isinstance(value, float) else f"{value:,}"


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (``int``, or ``float`` for any real) between ``left`` and ``right``
    (None: unbounded), the ends ``closed`` as "both", "left", "right" or "neither"."""

    kind: type
    left: float | None
    right: float | None
    closed: str = "both"

    def accepts(self, value: Any) -> bool:
        if not (_is_int(value) if self.kind is int else _is_real(value)) or math.isnan(value):
            return False
        if self.left is not None and (value < self.left or value == self.left and self.closed in ("right", "neither")):
            return False
        return self.right is None or value < self.right or value == self.right and self.closed in ("right", "both")

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        if self.left is not None and self.right is None and self.closed in ("both", "left"):
            return f"{what} >= {_bound(self.left, '')}"
        opening = "[" if self.closed in ("both", "left") and self.left is not None else "("
        closing = "]" if self.closed in ("both", "right") and self.right is not None else ")"
        return f"{what} in {opening}{_bound(self.left, '-')}, {_bound(self.right, '')}{closing}"


@dataclass(frozen=True)
class Options:
    """One of ``values`` (strings or other hashable values)."""

    values: tuple

    def accepts(self, value: Any) -> bool:
        return any(value == v and isinstance(value, bool) == isinstance(v, bool) for v in self.values)

    def describe(self) -> str:
        return "one of " + ", ".join(map(str, self.values))


@dataclass(frozen=True)
class InstanceOf:
    """Any value of ``kind`` (``bool`` accepts only True / False, ``int`` no bool)."""

    kind: type

    def accepts(self, value: Any) -> bool:
        if self.kind is int:
            return _is_int(value)
        if self.kind is float:
            return _is_real(value)
        return isinstance(value, self.kind)

    def describe(self) -> str:
        return {bool: "true or false", str: "a string", int: "an integer", float: "a number"}.get(
            self.kind, f"a {self.kind.__name__}")


@dataclass(frozen=True)
class Satisfies:
    """Values of ``kind`` (as ``InstanceOf``) that pass ``test``, described by ``text``: a rule
    no interval or option list states (a power of two, an even number)."""

    kind: type
    test: Callable[[Any], bool]
    text: str

    def accepts(self, value: Any) -> bool:
        return InstanceOf(self.kind).accepts(value) and bool(self.test(value))

    def describe(self) -> str:
        return self.text


Constraint = Interval | Options | InstanceOf | Satisfies | None

POSITIVE_INT = (Interval(int, 1, None),)
"""An integer of at least 1 (a count)."""
POSITIVE = (Interval(float, 0, math.inf, "neither"),)
"""A positive finite number (a learning rate, a scale)."""
OPEN_UNIT = (Interval(float, 0, 1, "neither"),)
"""A number strictly between 0 and 1 (a power, a confidence)."""
MAX_SEED = 2**63 - 1
"""Seeds are stored as SQLite INTEGER (signed 64 bits): 0 .. 2^63 - 1."""
SEED = (Interval(int, 0, MAX_SEED),)
"""A seed's constraint: an integer 0 .. 2^63 - 1."""


@dataclass(frozen=True)
class Parameter:
    """A declared parameter: its name, default, constraints and a one-line help."""

    name: str
    default: Any
    constraints: tuple[Constraint, ...] = ()
    help: str = ""


def satisfied(value: Any, constraints: tuple[Constraint, ...]) -> bool:
    """Whether ``value`` satisfies any of ``constraints`` (an empty tuple admits anything)."""
    if not constraints:
        return True
    return any(value is None if c is None else c.accepts(value) for c in constraints)


def describe(constraints: tuple[Constraint, ...]) -> str:
    return " or ".join("None" if c is None else c.describe() for c in constraints)


def check(name: str, value: Any, constraints: tuple[Constraint, ...], why: str = "") -> None:
    """ParameterError naming ``name`` unless ``value`` satisfies ``constraints`` (``why``, if
    given, follows the rule in parentheses: ``"the canaries of the audit"``)."""
    if not satisfied(value, constraints):
        reason = f" ({why})" if why else ""
        raise ParameterError(name, f"must be {describe(constraints)}{reason}, got {value!r}")


def validate(values: Mapping[str, Any], parameters: tuple[Parameter, ...], prefix: str = "") -> None:
    """Check every value against its declared parameter (``validate_params``); an unknown
    parameter is an error naming it and the known ones."""
    declared = {p.name: p for p in parameters}
    for name, value in values.items():
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise ParameterError(f"{prefix}{name}", f"no such parameter (parameters: {known})")
        check(f"{prefix}{name}", value, declared[name].constraints)
