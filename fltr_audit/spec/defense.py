"""A defense stack as a value (``DefenseSpec``): its canonical name, validated once when parsed.

A run never shares a live defense object with another run: adaptive aggregators (``dp-fedavg``
with ``quantile > 0``) and stateful protocols change as they run, so each run builds a fresh
stack from its spec (``build``), in its own process or thread. The spec pickles, hashes and
compares as its canonical name (``defenses.stack`` grammar: ``clip(sensitivity=5)+dp-distributed(eps=4.5)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from defenses.stack import Component, DefenseStack, build_stack, parse_components
from fltr_audit.engine.interfaces import PrivacyClaim


@lru_cache(maxsize=256)
def _components(text: str) -> tuple[Component, ...]:
    """The validated components of a defense string, parsed once per process
    (``defenses.stack.parse_components``: FltrError naming the string on bad input)."""
    return parse_components(text)


def _canonical(text: str) -> str:
    return "+".join(c.token for c in _components(text)) or "none"


@dataclass(frozen=True)
class DefenseSpec:
    """A validated defense stack, by its canonical name (``parse`` builds it from any spelling)."""

    name: str

    @classmethod
    def parse(cls, text: str) -> "DefenseSpec":
        """The spec of ``text`` (any accepted spelling); FltrError naming the string when it is not a stack."""
        return cls(_canonical(str(text).strip()))

    def build(self) -> DefenseStack:
        """A fresh stack (new objects every call: never shared between runs or uses)."""
        return build_stack(_components(self.name), f"defense {self.name!r}")

    @property
    def claim(self) -> PrivacyClaim:
        """The claim the stack makes (the same for every fresh stack)."""
        return _claim(self.name)

    def __str__(self) -> str:
        return self.name


@lru_cache(maxsize=256)
def _claim(name: str) -> PrivacyClaim:
    return DefenseSpec(name).build().claim


NO_DEFENSE = DefenseSpec("none")
