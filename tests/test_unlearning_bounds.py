"""Canary clients for unlearning (``attacks.unlearning_canaries``) and the forgetting verdicts
(``attacks.unlearning_bounds``): what leaves the code, and the verdict rules' soundness by
repetition on simulated scores (the engine is not what these test)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attacks.unlearning_bounds import (detectable_residue, forgetting_verdict, membership, server_test)
from attacks.unlearning_canaries import canary_clients, canary_scores, design, median_norm, unit_directions
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.population import parse_non_iid, with_population_clicks
from fltr_audit.engine.randomness import stream


def test_the_design_draws_distinct_population_members_and_orthonormal_directions():
    plan, others = design(200, 30, 50, 46, seed=4)
    assert len(set(plan.ids) | set(others)) == 80 and set(plan.ids).isdisjoint(others)
    assert plan.ids.max() < 200 and np.all(np.diff(plan.ids) > 0) and np.all(np.diff(others) > 0)
    assert np.allclose(plan.directions @ plan.directions.T, np.eye(30), atol=1e-12)
    again, _ = design(200, 30, 50, 46, seed=4)
    assert np.array_equal(again.present, plan.present) and np.array_equal(again.directions, plan.directions)
    many = unit_directions(100, 8, np.random.default_rng(0))
    assert np.allclose(np.linalg.norm(many, axis=1), 1.0)
    secrets = np.concatenate([design(1000, 400, 0, 4, seed=s)[0].present for s in range(5)])
    assert abs(secrets.mean() - 0.5) < 0.03


def test_canary_clients_craft_only_their_rows_and_keep_the_real_ones_bit_for_bit():
    splits = load_splits("synthetic:mq2008?queries=40", 1)
    alg = algorithms.build("fpdgd", splits, "perfect", {"seed": 0, "params": {}})
    plan, _ = design(20, 4, 0, alg.ranker.n_params, seed=1, scale=7.0)
    wrapped = canary_clients(alg, plan)
    params = np.random.default_rng(0).normal(size=alg.ranker.n_params) * 0.1
    ids = np.arange(0, 20, 2)
    queries = np.arange(len(ids))[:, None]
    real = alg.client_step(params, splits.train, queries, ids, stream(0, "c", 1), stream(0, "p", 1))
    out = wrapped.client_step(params, splits.train, queries, ids, stream(0, "c", 1), stream(0, "p", 1))
    rows, which = plan.rows(ids)
    others = np.setdiff1d(np.arange(len(ids)), rows)
    assert np.array_equal(out.messages.vector[others], real.messages.vector[others])
    step = 7.0 * median_norm(real.messages.updates(params))
    assert np.allclose(out.messages.updates(params)[rows], step * plan.directions[which])
    down = wrapped.ascending().client_step(params, splits.train, queries, ids, stream(0, "c", 1), stream(0, "p", 1))
    assert np.allclose(down.messages.updates(params)[rows], -step * plan.directions[which])
    population = with_population_clicks(wrapped, parse_non_iid("click-preference"), 0)
    assert type(population.inner.click_model).__name__ == "UserClicks" and alg.click_model is not None
    assert type(wrapped).user_clicks is True


def test_scores_are_cosines_with_the_offset_from_the_reference():
    plan, _ = design(10, 3, 0, 5, seed=0)
    ref = np.ones(5)
    model = ref + 2.0 * plan.directions[1]
    assert np.allclose(canary_scores(plan, model, ref), [0.0, 1.0, 0.0], atol=1e-12)
    assert np.array_equal(canary_scores(plan, ref, ref), np.zeros(3))


def _scores(rng, m, signal):
    present = rng.random(m) < 0.5
    return present, signal * present + rng.normal(size=m)


def test_strong_scores_read_not_forgotten_at_the_canary_limit_and_none_read_forgotten():
    rng = np.random.default_rng(0)
    present, strong = _scores(rng, 200, 50.0)
    counts = np.full(200, 3)
    m = membership(strong, present, counts)
    assert m.limited_by_canaries and m.epsilon_lb == m.limit > 0 and m.auc == 1.0
    assert forgetting_verdict(m, m) == "not forgotten"
    zero = membership(np.zeros(200), present, counts)
    assert zero.epsilon_lb == 0 and forgetting_verdict(zero, m) == "forgotten"
    assert forgetting_verdict(zero, zero) == "untestable"  # the trained model shows nothing either
    none_eligible = membership(strong, present, np.zeros(200, dtype=int))
    assert forgetting_verdict(none_eligible, m) == "untestable"


@pytest.mark.slow
def test_the_forgetting_verdict_is_sound_by_repetition():
    """Scores that do not depend on the secrets read ``not forgotten`` in at most 5 % of runs (the
    one-run bound's 95 %): 400 simulated audits of 40-200 canaries, 1-10 participations."""
    rng = np.random.default_rng(7)
    wrong = 0
    runs = 400
    for i in range(runs):
        m = int(rng.integers(40, 201))
        present = rng.random(m) < 0.5
        counts = rng.integers(0, 11, m)
        scores = rng.standard_t(3, m) * (counts + 1)  # heavy tails, tied to the schedule, never to the secrets
        wrong += membership(scores, present, counts).epsilon_lb > 0
    assert wrong <= 0.05 * runs + 2 * math.sqrt(0.05 * 0.95 * runs)  # 5 %, plus two standard errors


def test_tpr_at_low_fpr_needs_enough_excluded_canaries():
    rng = np.random.default_rng(3)
    present = rng.random(600) < 0.5
    scores = present * 3.0 + rng.normal(size=600)
    m = membership(scores, present, np.ones(600, dtype=int))
    assert 0 < m.tpr_at_fpr_0_01 <= 1 and math.isnan(m.tpr_at_fpr_0_001)  # ~300 excluded: 1 % yes, 0.1 % no


def test_the_detectable_residue_is_the_smallest_share_the_audit_catches():
    rng = np.random.default_rng(1)
    present = rng.random(100) < 0.5
    counts = np.ones(100, dtype=int)
    noise = rng.normal(size=100)
    before = 5.0 * present + noise * 0.1
    rho = detectable_residue(noise, noise + before, present, counts)
    assert 0 < rho < 1
    show = membership(noise + rho * before, present, counts).epsilon_lb
    below = membership(noise + (rho - 2 ** -13) * before, present, counts).epsilon_lb
    assert show > 0 and below == 0
    assert math.isnan(detectable_residue(noise, noise, present, counts))  # the trained model shows nothing


def test_the_server_test_counts_what_the_pair_adds():
    rng = np.random.default_rng(2)
    present = rng.random(300) < 0.5
    counts = np.ones(300, dtype=int)
    weak = 0.3 * present + rng.normal(size=300)
    alone = membership(weak, present, counts)
    same = server_test(2 * weak, weak, present, counts, alone)
    assert (same.pair_only, same.before_only, same.verdict) == (0, 0, "adds nothing measurable")
    more = server_test(10.0 * present + rng.normal(size=300), weak, present, counts, alone)
    assert more.verdict == "reveals more" and more.pair_only > more.before_only and more.p_value < 0.05
    strong = 10.0 * present + rng.normal(size=300)
    limited = membership(strong, present, counts)
    assert server_test(strong, strong, present, counts, limited).verdict == "untestable"


@pytest.mark.slow
def test_the_server_verdict_is_sound_by_repetition():
    """A pair that adds only noise to what the before model shows reads ``reveals more`` in at most
    5 % of runs (400 simulated audits)."""
    rng = np.random.default_rng(11)
    wrong = 0
    for _ in range(400):
        present = rng.random(120) < 0.5
        counts = np.ones(120, dtype=int)
        before = 0.5 * present + rng.normal(size=120)
        pair = before + rng.normal(size=120) * rng.uniform(0, 2)
        wrong += server_test(pair, before, present, counts, membership(before, present, counts)).verdict == \
            "reveals more"
    assert wrong <= 20 + 2 * math.sqrt(400 * 0.05 * 0.95)
