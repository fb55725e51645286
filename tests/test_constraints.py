"""The constraint language (fltr_audit/constraints.py) against brute-force membership, and the
doors that rename a parameter to what their user typed."""

import math

import pytest

from fltr_audit.constraints import (InstanceOf, Interval, Options, Parameter, ParameterError, Satisfies, check,
                                    describe, satisfied, validate)


@pytest.mark.parametrize("closed", ["both", "left", "right", "neither"])
def test_interval_membership_equals_the_definition(closed):
    interval = Interval(float, -1.0, 2.0, closed)
    for x in [v / 4 for v in range(-12, 13)]:
        inside = -1.0 < x < 2.0 or (x == -1.0 and closed in ("both", "left")) or (x == 2.0 and closed in ("both", "right"))
        assert interval.accepts(x) == inside, (x, closed)


def test_interval_types_and_unbounded_ends():
    positive = Interval(int, 1, None)
    assert positive.accepts(1) and positive.accepts(10**18) and not positive.accepts(0)
    assert not positive.accepts(1.0) and not positive.accepts(True)       # no floats, no bools for int
    assert Interval(float, 0, None, "neither").accepts(3) and not Interval(float, 0, None).accepts(math.nan)
    assert positive.describe() == "an integer >= 1"
    assert Interval(float, 0, 1, "right").describe() == "a number in (0, 1]"


def test_options_and_instances_keep_bools_apart():
    assert Options(("a", "b")).accepts("a") and not Options(("a", "b")).accepts("c")
    assert not Options((1, 2)).accepts(True) and Options((True,)).accepts(True)
    assert InstanceOf(bool).accepts(False) and not InstanceOf(int).accepts(False)
    assert satisfied(None, (Interval(int, 1, None), None)) and not satisfied(None, (Interval(int, 1, None),))
    assert describe((Interval(int, 1, None), None)) == "an integer >= 1 or None"


def test_errors_name_the_parameter_and_each_door_renames_it():
    with pytest.raises(ParameterError) as info:
        check("probe.cohort", 0, (Interval(int, 1, None),))
    assert str(info.value) == "probe.cohort: must be an integer >= 1, got 0"
    assert str(info.value.renamed({"probe.cohort": "--probe-cohort"})) == "--probe-cohort: must be an integer >= 1, got 0"
    keyed = info.value.renamed({}, where="c.toml: ", form="key '{}'")
    assert str(keyed) == "c.toml: key 'probe.cohort': must be an integer >= 1, got 0" and keyed.parameter == "probe.cohort"


def test_validate_refuses_undeclared_keys():
    params = (Parameter("lr", 0.1, (Interval(float, 0, None, "neither"),)),)
    validate({"lr": 0.5}, params)
    with pytest.raises(ParameterError, match=r"^lrr: no such parameter \(parameters: lr\)"):
        validate({"lrr": 0.5}, params)
    with pytest.raises(ParameterError, match=r"^lr: must be a number in \(0, inf\), got -1"):
        validate({"lr": -1}, params)


def test_numpy_integers_are_integers_and_a_rule_checks_its_kind_first():
    import numpy as np

    assert Interval(int, 1, None).accepts(np.int64(3)) and not Interval(int, 1, None).accepts(np.float64(3.0))
    assert Interval(float, 0, 1).accepts(np.float32(0.5)) and not Interval(float, 0, 1).accepts(np.bool_(True))
    power = Satisfies(int, lambda v: v >= 1 and v & (v - 1) == 0, "a power of two")
    brute = {2 ** e for e in range(12)}
    assert [v for v in range(-4, 2049) if power.accepts(v)] == sorted(brute)
    assert not power.accepts(64.0) and not power.accepts(True)
    with pytest.raises(ParameterError, match="^dim: must be a power of two, got 48$"):
        check("dim", 48, (power,))
