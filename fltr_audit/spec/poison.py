"""The poisoning setting of a run as a value: ``PoisonSpec`` (attack name, fraction, parameters).

Written ``NAME(fraction=F,key=value,...)`` (``--poison``, a campaign's ``poison`` axis) or ``none``;
parsed and validated once at the door against the attacks' declarations
(``attacks.poisoning.catalog``), frozen and hashable, and built into a fresh attack for each run
(``build``). The canonical text writes ``fraction`` and every parameter that differs from its
default, numbers as ``%.12g``, so equal settings have equal texts (and run keys).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from attacks.poisoning.catalog import build, check_applies, check_params, poison_attack
from fltr_audit.constraints import Interval, ParameterError


def _fmt(value: Any) -> str:
    return format(value, ".12g") if isinstance(value, float) else str(value)


def _literal(raw: str) -> Any:
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


@dataclass(frozen=True)
class PoisonSpec:
    """A validated poisoning setting: ``name``, ``fraction`` and the other parameters, all filled in
    (defaults included), as sorted (key, value) pairs."""

    name: str
    fraction: float
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def text(self) -> str:
        """The canonical text, e.g. ``lie(fraction=0.2)``."""

        values = dict(self.params)
        shown = [f"fraction={_fmt(self.fraction)}"] + [
            f"{p.name}={_fmt(values[p.name])}" for p in poison_attack(self.name).params
            if p.name in values and values[p.name] != p.default]
        if values.get("who", "fixed") != "fixed":
            shown.append(f"who={values['who']}")
        return f"{self.name}({','.join(shown)})"

    def kwargs(self) -> dict[str, Any]:
        """Every parameter as keywords, ``fraction`` included."""
        return {"fraction": self.fraction, **dict(self.params)}

    def check_applies(self, algorithm: str, message_kind: str, user_clicks: bool) -> None:
        """ParameterError naming ``poison`` unless ``algorithm``'s messages can carry the attack."""

        check_applies(self.name, algorithm, message_kind, user_clicks)

    def build(self, *, seed: int, n_levels: int) -> Any:
        """A fresh attack (``fltr_audit.engine.poisoning.Poisoning``) for one run of ``seed``."""

        return build(self.name, self.kwargs(), seed=seed, n_levels=n_levels, label=self.text)


def _typed(name: str, values: dict[str, Any]) -> dict[str, Any]:
    """Integers given for a float parameter as floats (``scale=1`` and ``scale=1.0`` are one setting)."""

    floats = {p.name for p in poison_attack(name).parameters
              if any(isinstance(c, Interval) and c.kind is float for c in p.constraints)}
    return {k: float(v) if k in floats and isinstance(v, int) else v for k, v in values.items()}


def parse_poison(text: str | None) -> PoisonSpec | None:
    """``NAME(fraction=F,key=value,...)`` as a ``PoisonSpec``; None for ``none`` (or None).
    ParameterError naming ``poison`` (the door renames it, e.g. ``--poison``) on bad input."""

    spelled = (text or "none").strip()
    if spelled == "none":
        return None
    m = re.fullmatch(r"([a-z][a-z-]*)\s*(?:\((.*)\))?", spelled)
    if not m:
        raise ParameterError("poison", f"malformed {spelled!r} (expected NAME(fraction=F,key=value,...))")
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
        key, eq, raw = part.partition("=")
        if not eq or not key.strip():
            raise ParameterError("poison", f"{m.group(1)}: expected key=value, got {part!r}")
        if key.strip() in values:
            raise ParameterError("poison", f"{m.group(1)}: parameter {key.strip()!r} given twice")
        values[key.strip()] = _literal(raw.strip())
    filled = _typed(m.group(1), check_params(m.group(1), values))
    fraction = filled.pop("fraction")
    return PoisonSpec(m.group(1), float(fraction), tuple(sorted(filled.items())))
