"""Capabilities are declared on types, not guessed: every aggregator subclasses ``AggregatorBase``
(what it reads, needs and sees), a plug-in's declarations are read once at its door and checked,
and no code outside that door guesses a capability with ``getattr``/``hasattr`` defaults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from defenses.catalog import SPECS
from defenses.registration import register_defense
from defenses.robust.compose import check_cohort
from defenses.stack import parse_defense
from fltr_audit.engine.interfaces import Aggregate, AggregatorBase, PrivacyClaim
from fltr_audit.errors import FltrError

ROOT = Path(__file__).resolve().parents[1]
CAPABILITIES = ("reads_global_model", "min_cohort", "sees", "robust_rule", "privatizes", "local_updates",
                "zero_cohort_means")
PLUG_IN_DOOR = {"defenses/registration.py"}
"""The one place a plug-in's declarations are read, with defaults, and checked."""


@pytest.mark.parametrize("name", [n for n, s in SPECS.items() if s.role == "aggregator"])
def test_every_aggregator_declares_on_its_type(name):
    spec = SPECS[name]
    built = spec.build(**{p.name: p.default for p in spec.params}, name=spec.name)
    assert isinstance(built, AggregatorBase), name


def test_no_capability_is_guessed_outside_the_plug_in_door():
    pattern = re.compile(r"(getattr|hasattr)\([^)]*[\"'](" + "|".join(CAPABILITIES) + r")[\"']")
    found = []
    for package in ("fltr_audit", "attacks", "defenses", "reports"):
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel in PLUG_IN_DOOR:
                continue
            found += [f"{rel}:{i}" for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found


class _Sum:
    """A plug-in aggregator that declares it needs only the sum and three clients."""

    claim = PrivacyClaim()
    sees = "sum"
    min_cohort = 3

    def aggregate(self, messages, participants, rng, **extra):
        return Aggregate(mean=messages.vector.mean(0), participants=participants, dropouts=participants[:0],
                         messages=None)


class _Bad(_Sum):
    sees = "everything"


def test_a_plug_in_aggregators_declarations_are_read_and_checked():
    try:
        register_defense("test-sum-aggregator", lambda: _Sum(), role="aggregator", replace=True)
        stack = parse_defense("test-sum-aggregator")
        built = stack.aggregator
        assert (built.sees, built.min_cohort, built.reads_global_model, built.robust_rule) == ("sum", 3, False, False)
        with pytest.raises(FltrError, match="a cohort of 2 clients is below the 3 it needs"):
            check_cohort(stack, 2)  # its declared min_cohort is checked at the door
        check_cohort(stack, 3)
        register_defense("test-bad-aggregator", lambda: _Bad(), role="aggregator", replace=True)
        with pytest.raises(FltrError, match="sees in updates, distances, sum"):
            parse_defense("test-bad-aggregator")
    finally:  # registered for this test only (``defenses list`` in the same worker builds every plug-in)
        SPECS.pop("test-sum-aggregator", None)
        SPECS.pop("test-bad-aggregator", None)
