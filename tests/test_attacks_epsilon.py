"""Epsilon of privatized MaxRR: the closed-form enumeration against an independent brute force
over all pairs of placements, monotonicity in p, the theoretical bound, FOLtR-ES Table 2."""

import itertools

import numpy as np
import pytest

from attacks.epsilon import maxrr_epsilon, theoretical_bound
from fltr_audit.engine.clicks import CCM_TABLES, cascade_model
from fltr_audit.errors import FltrError
from tests.cli_json import cli_result


def _pattern_prob(labels, pattern, click_prob, stop_prob):
    """Probability of an exact click pattern under the CCM: examine top-down, click with c(r);
    after a click stop with s(r) (if a later click follows, the user must have continued)."""
    prob = 1.0
    last = max((i for i, c in enumerate(pattern) if c), default=-1)
    for i, (r, c) in enumerate(zip(labels, pattern)):
        pc = click_prob[r]
        prob *= pc if c else 1.0 - pc
        if c and i < last:
            prob *= 1.0 - stop_prob[r]
        if c and i == last:
            # after the last click: either stop, or continue and click nothing more
            rest = 1.0
            for r2 in labels[i + 1 :]:
                rest *= 1.0 - click_prob[r2]
            return prob * (stop_prob[r] + (1.0 - stop_prob[r]) * rest)
    return prob


def _brute_force_epsilon(name, levels, L, p):
    click, stop = CCM_TABLES[(name, levels)]
    placements = list(itertools.product(range(levels), repeat=L))
    p0 = np.array([_distribution(list(pl), click, stop) for pl in placements])   # (N, L+1)
    n = L + 1
    pt = p * p0 + (1 - p) * (1 - p0) / (n - 1)
    best = -np.inf
    for v in range(n):
        ratios = pt[:, None, v] / pt[None, :, v]          # every ordered pair of placements
        best = max(best, np.log(ratios.max()))
    return best


def _distribution(labels, click, stop):
    L = len(labels)
    dist = np.zeros(L + 1)
    for pattern in itertools.product((0, 1), repeat=L):
        dist[pattern.index(1) if 1 in pattern else L] += _pattern_prob(labels, pattern, click, stop)
    return dist


def test_pattern_probabilities_sum_to_one():
    click, stop = CCM_TABLES[("informational", 3)]
    assert _distribution([2, 0, 1], click, stop).sum() == pytest.approx(1.0)


@pytest.mark.parametrize("name,levels", sorted(CCM_TABLES))
def test_enumeration_equals_brute_force_over_all_pairs(name, levels):
    L = 3 if levels == 5 else 4
    for p in (0.3, 0.6, 0.9):
        assert maxrr_epsilon(name, p, L, levels).epsilon == pytest.approx(_brute_force_epsilon(name, levels, L, p), rel=1e-12)


def test_reported_pair_and_value_reach_epsilon():
    r = maxrr_epsilon("navigational", 0.9, 6, 3)
    click, stop = CCM_TABLES[("navigational", 3)]
    hi = _distribution(list(r.placement_high), click, stop)[r.value_index]
    lo = _distribution(list(r.placement_low), click, stop)[r.value_index]
    n = 7
    pt = lambda q: 0.9 * q + 0.1 * (1 - q) / (n - 1)   # noqa: E731
    assert np.log(pt(hi) / pt(lo)) == pytest.approx(r.epsilon)
    assert r.value == pytest.approx(1.0 / (r.value_index + 1) if r.value_index < 6 else 0.0)


def test_epsilon_grows_with_p_and_perfect_meets_the_bound():
    ps = np.linspace(0.2, 0.99, 12)
    for levels in (3, 5):
        for name in ("perfect", "navigational", "informational"):
            eps = [maxrr_epsilon(name, p, 10, levels).epsilon for p in ps]
            assert np.all(np.diff(eps) > 0)
            bound = [theoretical_bound(p, 11) for p in ps]
            assert np.all(np.array(eps) <= np.array(bound) + 1e-12)
            if name == "perfect":
                np.testing.assert_allclose(eps, bound, rtol=1e-12)


def test_table_2_of_foltr_es():
    """Published values (L = 5, three levels), two decimals."""
    table = {
        "perfect": [0.51, 1.61, 2.71, 3.81, 4.55, 6.20],
        "navigational": [0.47, 1.52, 2.58, 3.65, 4.39, 6.00],
        "informational": [0.28, 1.00, 1.70, 2.56, 3.13, 4.39],
    }
    for name, values in table.items():
        for p, v in zip([0.25, 0.5, 0.75, 0.9, 0.95, 0.99], values):
            assert abs(maxrr_epsilon(name, p, 5, 3).epsilon - v) <= 0.005 + 1e-9


def test_custom_model_and_bad_input():
    model = cascade_model("mine", 3, click_prob=[0.1, 0.5, 0.8], stop_prob=[0, 0, 0])
    assert maxrr_epsilon(model, 0.7, 3).click_model == "mine"
    with pytest.raises(FltrError, match="^p: "):
        maxrr_epsilon("perfect", 1 / 11, 10)
    with pytest.raises(FltrError, match="^length: "):
        maxrr_epsilon("perfect", 0.5, 0)
    with pytest.raises(FltrError, match="^click_model: "):
        maxrr_epsilon("perfect", 0.5, 5, 4)
    assert maxrr_epsilon("perfect", 1.0, 5).epsilon == np.inf


def test_cli_json_and_errors(capsys):
    from fltr_audit.cli import main

    assert main(["epsilon", "--click-model", "navigational", "--p", "0.5", "--length", "5", "--json"]) == 0
    (obj,) = cli_result(capsys.readouterr().out)  # one shape: a list of records, even of one
    assert obj["epsilon"] == pytest.approx(maxrr_epsilon("navigational", 0.5, 5).epsilon)
    assert obj["theoretical"] == pytest.approx(np.log(0.5 * 5 / 0.5))
    assert main(["epsilon", "--click-model", "perfect", "--p", "0.5,0.9", "--json"]) == 0
    rows = cli_result(capsys.readouterr().out)
    assert [r["p"] for r in rows] == [0.5, 0.9]
    assert main(["epsilon", "--p", "0.01"]) == 2
    err = capsys.readouterr()
    assert err.out == "" and err.err.startswith("fltr-audit: error: --p") and err.err.count("\n") == 1


def test_epsilon_rows_tabulate_the_enumeration():
    from attacks.epsilon import epsilon_rows

    rows = epsilon_rows(["perfect", "informational"], [0.5, 0.9], length=6, levels=5)
    assert [(r["click_model"], r["p"]) for r in rows] == [("perfect", 0.5), ("perfect", 0.9),
                                                          ("informational", 0.5), ("informational", 0.9)]
    for r in rows:
        exact = maxrr_epsilon(r["click_model"], r["p"], length=6, levels=5)
        assert (r["epsilon"], r["theoretical"], r["length"], r["levels"]) == (exact.epsilon, exact.theoretical, 6, 5)
