"""--population: cohorts drawn from N persistent users, each with its own query stream."""


import numpy as np
import pytest
from scipy import stats

from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.cli import main
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.synthetic import fold_split, generate
from fltr_audit.errors import FltrError
from fltr_audit.engine.cohorts import Participations, cohort, participations
from fltr_audit.engine.federation import train
from fltr_audit.engine.schedule import user_queries
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.engine.training import TrainHooks, TrainSettings
from tests.cli_json import cli_result


class Ids:
    def __init__(self):
        self.ids, self.queries = [], []

    def __call__(self, batch):
        self.ids.append(batch.truth.client_ids.copy())
        self.queries.append(batch.view.interactions.queries.copy())


@pytest.fixture(scope="module")
def data():
    return fold_split(generate("mq2008", queries=300, seed=1), 1).train


def run(data, population, rounds=40, clients=10, seed=0):
    ids = Ids()
    algo = FPDGD(LinearRanker(data.n_features), cascade_model("perfect", data.n_levels), lr=0.1)
    res = train(algo, data,
                TrainSettings(clients=clients, queries_per_client=2, rounds=rounds, seed=seed, population=population),
                hooks=TrainHooks(interceptors=[ids]))
    return res, ids


def test_cohorts_are_sampled_at_rate_clients_over_population(data):
    res, ids = run(data, population=50, rounds=200)
    counts = np.bincount(np.concatenate(ids.ids), minlength=50)
    assert all(len(np.unique(c)) == 10 and c.max() < 50 for c in ids.ids)
    assert counts.sum() == 2000 and res.config["sampling_rate"] == 0.2
    # each user takes part in a round with probability 0.2: counts ~ Binomial(200, 0.2)
    assert stats.chisquare(counts).pvalue > 0.001
    assert res.config["rounds_participated_max"] == counts.max()
    # the accountant's schedule is the engine's, recomputed from the seed without training
    np.testing.assert_array_equal(participations(0, 200, 10, 50).dense(), counts)


def test_each_user_has_its_own_query_stream(data):
    _, ids = run(data, population=30, rounds=30)
    seen = {}
    for c, q in zip(ids.ids, ids.queries):
        for user, qs in zip(c, q):
            seen.setdefault(int(user), []).append(qs)
    user = max(seen, key=lambda u: len(seen[u]))
    expected = user_queries(0, np.full(len(seen[user]), user), np.arange(len(seen[user])), 2, data.n_queries)
    np.testing.assert_array_equal(np.array(seen[user]), expected)


def test_user_queries_are_uniform_and_seeded():
    q = user_queries(7, np.arange(5000), np.zeros(5000, dtype=np.int64), 4, 37)
    assert stats.chisquare(np.bincount(q.ravel(), minlength=37)).pvalue > 0.001
    assert not np.array_equal(q, user_queries(8, np.arange(5000), np.zeros(5000, dtype=np.int64), 4, 37))


def test_default_is_unchanged_and_population_below_the_cohort_is_refused(data):
    a, _ = run(data, population=None, rounds=3)
    assert "population" not in a.config
    with pytest.raises(FltrError, match="^population: "):
        run(data, population=9, rounds=1)


def test_cli_train_reports_privacy(tmp_path, capsys):
    code = main(["train", "fpdgd", "--data", "synthetic:mq2008?queries=120", "--clients", "5", "--rounds", "4",
                 "--population", "50", "--defense", "dp-gaussian(sigma=1,clip=1)", "--out", str(tmp_path / "o"),
                 "--json", "--quiet"])
    assert code == 0
    privacy = cli_result(capsys.readouterr().out)["privacy"]
    assert privacy["sampling_rate"] == 0.1 and "rounds_participated" not in privacy
    assert privacy["participations_max"] == participations(0, 4, 5, 50).max() >= 1
    assert privacy["accountant_observer"] == "pld, poisson sampling"
    assert privacy["epsilon_observer"] < privacy["epsilon_per_round"] <= privacy["epsilon_server"]
    assert main(["train", "fpdgd", "--data", "synthetic:mq2008?queries=120", "--clients", "5", "--population", "4",
                 "--out", str(tmp_path / "p"), "--quiet"]) == 2


def test_campaign_key_and_audit_option():
    from fltr_audit.spec.campaign import validate_spec
    from fltr_audit.spec.grid import expand

    base = {"name": "p", "algorithm": {"clients": 10, "rounds": 2}}
    runs = expand(validate_spec({**base, "algorithm": {**base["algorithm"], "population": 100}}))
    assert all(r.config["population"] == 100 for r in runs)
    assert "population" not in expand(validate_spec(base))[0].config   # older run keys unchanged
    with pytest.raises(FltrError, match="algorithm.population"):
        expand(validate_spec({**base, "algorithm": {**base["algorithm"], "population": 5}}))
    assert main(["audit", "--clients", "10", "--population", "5", "--quiet"]) == 2


def test_participations_equal_the_dense_counts_with_repeats_and_unsorted_ids():
    """The sparse counts against ``dense[ids] += 1`` (numpy's: a repeated id counts once per round)
    and ``dense[ids]`` for ids that took part, never did, or repeat.
    Catches: an insertion that breaks the order, a repeat counted twice, a stale count read."""
    rng = np.random.default_rng(3)
    sparse, dense = Participations(60), np.zeros(60, dtype=np.int64)
    for _ in range(40):
        ids = rng.integers(0, 60, rng.integers(0, 9))
        asked = rng.integers(0, 60, 12)
        np.testing.assert_array_equal(sparse.of(asked), dense[asked])
        sparse.add(ids)
        dense[ids] += 1
        assert np.all(np.diff(sparse.users) > 0) and (sparse.counts >= 1).all()
    np.testing.assert_array_equal(sparse.dense(), dense)
    assert sparse.max() == dense.max() and sparse.mean() == dense.mean()
    assert Participations(5).of(np.array([0, 4])).tolist() == [0, 0] and Participations(5).max() == 0


def test_a_billion_users_cost_only_the_users_who_took_part():
    """The cohort stream of a population of 10^9 is numpy's Floyd sampling (no arange of the
    population), and the participations of 5 rounds are stored for their 5,000 users only.
    Catches: a dense per-user array (8 GB here) or a cohort drawn by permuting the population."""
    import tracemalloc

    tracemalloc.start()
    took_part = participations(1, 5, 1000, 10**9)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 10_000_000
    cohorts = np.concatenate([cohort(1, r, 1000, 10**9) for r in range(1, 6)])
    np.testing.assert_array_equal(took_part.users, np.unique(cohorts))
    assert took_part.counts.sum() == 5000 and took_part.population == 10**9


def test_training_with_a_billion_users_allocates_nothing_per_user(data):
    """``train`` with a population of 10^9 (cohorts, query streams, participations and the
    accountant's schedule) peaks far below one byte per user; the schedule charges the cohorts'
    users. Catches: a dense per-user array anywhere on the population path (8 GB of int64 here)."""
    import tracemalloc

    from defenses.accounting import ParticipationSchedule

    tracemalloc.start()
    res, ids = run(data, population=10**9, rounds=3)
    schedule = ParticipationSchedule.of_run(0, 3, 10, 10**9)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 200_000_000
    assert schedule.worst == res.config["rounds_participated_max"] == 1 and schedule.absent == 10**9 - 30
    assert sorted(schedule.counts.tolist()) == [1] * 30 and schedule.quantile() == 0
