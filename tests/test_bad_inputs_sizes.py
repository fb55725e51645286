"""Bad-input family: sizes and values beyond what the machine or the arithmetic can hold (issue
39, items 5, 6 and 9). Each is one line naming the option, exit 2, before the allocation: sizes
are estimated from what the engine would allocate (``fltr_audit.engine.footprint``) and checked
against the machine's available memory (``fltr_audit.base.resources``; ``FLTR_AUDIT_MEMORY`` stands in
for a small machine). The peak RSS of the same commands is measured in ``test_bad_inputs_memory.py``."""

from __future__ import annotations

import pytest

from fltr_audit.constraints import ParameterError
from tests.test_bad_inputs import run_bad  # noqa: F401 (the fixture)

SMALL = "synthetic:mq2008?queries=60"
HUGE = 10**15


def _audit(*extra, click_model: str = "perfect") -> list:
    return ["audit", "--data", SMALL, "--rounds", 1, "--clients", 10, "--queries-per-client", 2,
            "--click-model", click_model, "--probe-cohort", 5, "--attack", "olsr", "--no-epsilon-audit", "--quiet",
            *extra]


def _train(*extra) -> list:
    return ["train", "fpdgd", "--data", SMALL, "--out", "o", "--rounds", 1, "--clients", 4, "--queries-per-client", 2,
            "--quiet", *extra]


SIZE_CASES = [  # item 6: out of memory with a culprit
    ("audit-population-1e15", _audit("--population", HUGE), "--population"),
    ("audit-run-population-1e15", ["audit-run", "fpdgd", "--data", SMALL, "--rounds", 1, "--clients", 20,
                                   "--queries-per-client", 1, "--canaries", 10, "--population", HUGE], "--population"),
    ("train-population-1e15", _train("--population", HUGE), "--population"),
    ("train-population-data-quantity", _train("--population", HUGE, "--non-iid", "data-quantity"), "--population"),
    ("foltr-es-population-1e15", ["train", "foltr-es", "--data", SMALL, "--out", "o", "--rounds", 1, "--clients", 4,
                                  "--population", HUGE, "--quiet"], "--population"),
    ("epsilon-length-1e9", ["epsilon", "--length", 10**9], "--length"),
    ("audit-counterfactual-1e9", _audit("--counterfactual", 10**9), "--counterfactual"),
    ("fedips-counterfactual-1e9", _audit("fedips", "--counterfactual", 10**9, click_model="pbm"),
     "--counterfactual"),
]
VALUE_CASES = [  # items 5 and 9: extreme values, empty settings
    ("power-min-effect-1e-300", ["audit", "--power", 0.9, "--min-effect", 1e-300, "--quiet"], "--min-effect"),
    ("power-min-effect-subnormal", ["audit", "--power", 0.9, "--min-effect", 5e-324, "--quiet"], "--min-effect"),
    ("demo-power-min-effect-1e-300", ["demo", "--out", "o", "--power", 0.9, "--min-effect", 1e-300, "--quiet"],
     "--min-effect"),
    ("non-iid-empty", _train("--non-iid", ""), "--non-iid"),
    ("non-iid-blank", _train("--non-iid", "   "), "--non-iid"),
    ("audit-non-iid-empty", _audit("--non-iid", ""), "--non-iid"),
]


@pytest.mark.parametrize("case, argv, culprit", SIZE_CASES + VALUE_CASES, ids=[c[0] for c in SIZE_CASES + VALUE_CASES])
def test_size_or_value_beyond_what_can_be_held(run_bad, case, argv, culprit):
    line = run_bad(argv, culprit)
    assert "internal error" not in line and "out of memory" not in line
    if case in dict((c[0], c) for c in SIZE_CASES):
        assert "more than this machine can give" in line
    assert not (run_bad.work / "o").exists()


def test_a_small_machine_refuses_a_population_a_large_one_holds(run_bad, monkeypatch):
    """10^9 users are not forbidden: refused only where the machine cannot hold them."""
    from fltr_audit.engine.footprint import check_population_memory, population_bytes

    monkeypatch.setenv("FLTR_AUDIT_MEMORY", str(10 * population_bytes(10**9)))
    check_population_memory(10**9)
    monkeypatch.setenv("FLTR_AUDIT_MEMORY", str(population_bytes(10**6)))
    with pytest.raises(ParameterError, match="population: a population of 1,000,000 users"):
        check_population_memory(10**6)
    assert population_bytes(10**6, "data-quantity") > population_bytes(10**6)
    run_bad(_train("--population", 10**6), "--population")


def test_the_counterfactual_estimate_scales_with_draws_and_slots(monkeypatch):
    from fltr_audit.engine.footprint import COUNTERFACTUAL_BYTES_PER_DRAW, check_counterfactual_memory

    monkeypatch.setenv("FLTR_AUDIT_MEMORY", str(1000 * 400 * COUNTERFACTUAL_BYTES_PER_DRAW * 2))
    check_counterfactual_memory(1000, 400)
    with pytest.raises(ParameterError, match="probe.counterfactual"):
        check_counterfactual_memory(3000, 400)


def test_planned_lists_are_computed_without_overflow():
    import math

    from scipy import stats

    from reports.leakage import ALPHA, MAX_PLANNED, PLANNING_SD, planned_lists

    z = stats.norm.ppf(1 - ALPHA / 3) + stats.norm.ppf(0.9 ** (1 / 3))
    assert planned_lists(0.02, 0.9, 3) == math.ceil((z * PLANNING_SD / 0.02) ** 2)  # a normal plan is unchanged
    assert planned_lists(1e-9, 0.9, 1) <= MAX_PLANNED
    for tiny in (1e-300, 5e-324, 1e-160):
        with pytest.raises(ValueError, match="min_effect"):
            planned_lists(tiny, 0.9, 3)


def test_memory_is_reported_in_units_a_person_reads():
    from fltr_audit.base.resources import size_text

    assert [size_text(n) for n in (512, 3_200_000_000, 16 * 10**15)] == ["512 bytes", "3.2 GB", "16.0 PB"]
