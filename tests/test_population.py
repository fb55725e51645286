"""--non-iid: the four settings of Wang & Zuccon (SIGIR 2022) on persistent populations."""

import itertools
import tracemalloc

import numpy as np
import pytest
from scipy import stats

from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.spec.campaign import validate_spec
from fltr_audit.spec.grid import expand
from fltr_audit.cli import main
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.synthetic import fold_split, generate
from fltr_audit.errors import FltrError
from fltr_audit.engine.federation import train
from fltr_audit.engine.population import (
    CLICK_PREFERENCE_MODELS, NonIID, UserClicks, _MODEL, check_buildable, parse_non_iid, query_sets,
    skewed_queries, user_choice, user_clicks, weighted_cohort,
)
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.engine.training import TrainHooks, TrainSettings


@pytest.fixture(scope="module")
def data():
    return fold_split(generate("mq2008", queries=200, seed=1), 1).train


class Seen:
    def __init__(self):
        self.ids, self.queries, self.clicks = [], [], []

    def __call__(self, batch):
        self.ids.append(batch.truth.client_ids.copy())
        self.queries.append(batch.view.interactions.queries.copy())


def test_parse_canonical_names_and_bad_values():
    assert parse_non_iid(None) == NonIID()
    assert parse_non_iid("label-skew(skew=0.5)").name == "label-skew(sets=4,skew=0.5)"
    assert parse_non_iid("data-quantity( alpha = 2 )").alpha == 2.0
    for bad, word in (("label-skew(skew=1.5)", "skew"), ("document-preference(share=-0.1)", "share"),
                      ("data-quantity(alpha=9)", "alpha"), ("label-skew(sets=0)", "sets"), ("nope", "unknown"),
                      ("click-preference(alpha=1)", "takes"), ("label-skew(sets=two)", "int")):
        with pytest.raises(FltrError, match=word) as err:
            parse_non_iid(bad)
        assert str(err.value).startswith("non_iid: ") and err.value.parameter == "non_iid"
    with pytest.raises(FltrError, match="distinct query sets"):
        check_buildable(parse_non_iid("label-skew(sets=11)"), 10)


def _successive_inclusion(weights, size):
    """Exact inclusion probabilities of sampling ``size`` without replacement, each draw
    proportional to the remaining weights (what Efraimidis-Spirakis keys realize)."""
    n = len(weights)
    incl = np.zeros(n)
    for order in itertools.permutations(range(n), size):
        p, left = 1.0, weights.sum()
        for i in order:
            p *= weights[i] / left
            left -= weights[i]
        incl[list(order)] += p
    return incl


def test_weighted_cohort_includes_users_with_successive_sampling_probabilities():
    rng = np.random.default_rng(0)
    draws = np.array([weighted_cohort(5, 2, 1.5, rng) for _ in range(20000)])
    assert all(len(set(d)) == 2 for d in draws[:100])
    counts = np.bincount(draws.ravel(), minlength=5)
    expected = _successive_inclusion(np.arange(1, 6, dtype=float) ** -1.5, 2) * 20000
    assert stats.chisquare(counts, expected).pvalue > 0.001
    # alpha = 0: uniform
    flat = np.bincount(np.array([weighted_cohort(5, 2, 0.0, rng) for _ in range(5000)]).ravel(), minlength=5)
    assert stats.chisquare(flat).pvalue > 0.001


def test_query_sets_are_ordered_by_mean_label(data):
    order, bounds = query_sets(data.labels, data.query_ptr, 4)
    assert sorted(order.tolist()) == list(range(data.n_queries)) and bounds[-1] == data.n_queries
    mean = [data.labels[data.query_rows(q)].mean() for q in range(data.n_queries)]
    for j in range(3):
        left, right = order[bounds[j]:bounds[j + 1]], order[bounds[j + 1]:bounds[j + 2]]
        assert max(mean[q] for q in left) <= min(mean[q] for q in right)


def test_label_skew_draws_from_the_home_set_with_the_skew_probability(data):
    setting = parse_non_iid("label-skew(sets=4,skew=0.7)")
    order, bounds = query_sets(data.labels, data.query_ptr, 4)
    users = np.arange(400)
    q = skewed_queries(3, setting, users, np.zeros(400, dtype=np.int64), 5, order, bounds)
    home = user_choice(3, 1, users, 4)
    set_of = np.empty(data.n_queries, dtype=np.int64)
    for j in range(4):
        set_of[order[bounds[j]:bounds[j + 1]]] = j
    at_home = (set_of[q] == home[:, None]).mean()
    share = (bounds[1:] - bounds[:-1]) / data.n_queries
    expected = 0.7 + 0.3 * share[home].mean()
    assert abs(at_home - expected) < 4 * np.sqrt(expected * (1 - expected) / q.size)
    always = skewed_queries(3, parse_non_iid("label-skew(sets=4,skew=1)"), users, np.zeros(400, dtype=np.int64), 5,
                            order, bounds)
    assert (set_of[always] == home[:, None]).all()


def test_document_preference_relabels_within_the_query(data):
    clicks = user_clicks(cascade_model("perfect", 3), parse_non_iid("document-preference(intents=3,share=1)"), 7)
    users = np.arange(60)
    rows = np.tile(np.arange(data.query_ptr[5], data.query_ptr[5] + 8), (60, 1))
    rows[:, -1] = -1
    got = clicks.user_labels(data.labels, data.query_ptr, rows, users)
    intent = user_choice(7, 3, users, 3)
    own = data.labels[data.query_rows(5)]
    assert (got[:, -1] == -1).all()
    assert (got[intent == 0, :-1] == data.labels[rows[0, :-1]]).all()
    assert np.isin(got[intent > 0, :-1], own).all()
    assert (got[intent > 0, :-1] != data.labels[rows[0, :-1]]).any()
    none = user_clicks(cascade_model("perfect", 3), parse_non_iid("document-preference(intents=3,share=0)"), 7)
    assert (none.user_labels(data.labels, data.query_ptr, rows, users) == got[intent == 0][0]).all()


def test_click_preference_users_click_by_their_own_model(data):
    model = user_clicks(cascade_model("perfect", 3), parse_non_iid("click-preference"), 2)
    assert isinstance(model, UserClicks)
    users = np.arange(3000)
    labels = np.zeros((3000, 10), dtype=np.int64)  # only non-relevant documents
    clicked = model.simulate_users(labels, data, np.zeros((3000, 10), dtype=np.int64), users,
                                   np.random.default_rng(0)).any(axis=1)
    which = user_choice(2, _MODEL, users, 3)
    rate = [clicked[which == m].mean() for m in range(3)]
    perfect, navigational, informational = (CLICK_PREFERENCE_MODELS.index(n) for n in CLICK_PREFERENCE_MODELS)
    assert rate[perfect] == 0.0                       # the perfect user never clicks a label-0 document
    p_nav = 1 - 0.95 ** 10
    assert abs(rate[navigational] - p_nav) < 4 * np.sqrt(p_nav * (1 - p_nav) / (which == navigational).sum())
    assert rate[informational] > 0.9


def test_settings_train_and_are_reproducible(data):
    for spec in ("document-preference", "label-skew", "click-preference", "data-quantity(alpha=2)"):
        runs = []
        for _ in range(2):
            seen = Seen()
            algo = FPDGD(LinearRanker(data.n_features), cascade_model("informational", 3))
            settings = TrainSettings(clients=10, queries_per_client=2, rounds=6, seed=3, population=100,
                                     non_iid=parse_non_iid(spec))
            runs.append((train(algo, data, settings, hooks=TrainHooks(interceptors=[seen])), seen))
        (a, _), (b, seen) = runs
        np.testing.assert_array_equal(a.params, b.params)
        assert a.config["non_iid"] == parse_non_iid(spec).name
        assert algo.click_model.name == "informational"  # the caller's algorithm is left as it was
    # data-quantity: the lowest ids take part far more often than the highest
    counts = np.bincount(np.concatenate(seen.ids), minlength=100)
    assert counts[:10].sum() > 5 * counts[-10:].sum()


def test_iid_default_is_unchanged(data):
    algo = FPDGD(LinearRanker(data.n_features), cascade_model("informational", 3))
    a = train(algo, data, TrainSettings(clients=10, queries_per_client=2, rounds=4, seed=3, population=100))
    b = train(algo, data,
              TrainSettings(clients=10, queries_per_client=2, rounds=4, seed=3, population=100, non_iid=NonIID()))
    np.testing.assert_array_equal(a.params, b.params)
    assert "non_iid" not in b.config


def test_a_million_users_take_memory_linear_in_users(data):
    """The per-user state is the participation count: about 8 bytes a user (no users x queries tables)."""
    algo = FPDGD(LinearRanker(data.n_features), cascade_model("informational", 3))
    tracemalloc.start()
    try:
        res = train(algo, data,
                    TrainSettings(clients=20, queries_per_client=2, rounds=2, seed=0, population=1_000_000,
                                  non_iid=parse_non_iid("data-quantity(alpha=1)")))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.config["population"] == 1_000_000
    assert peak < 40 * 1_000_000


def test_campaign_keys_unchanged_for_iid_and_new_per_setting():
    base = {"name": "t", "seeds": [0], "data": {"spec": "synthetic:mq2008", "folds": 1},
            "algorithm": {"name": "fpdgd", "rounds": 2, "clients": 5}, "probe": {}, "audit": {"defenses": ["none"]}}
    plain = expand(validate_spec(base, source="t"))
    iid = expand(validate_spec({**base, "algorithm": {**base["algorithm"], "non_iid": "iid"}}, source="t"))
    grid = expand(validate_spec({**base, "algorithm": {**base["algorithm"],
                                                       "non_iid": ["iid", "click-preference", "label-skew"]}},
                                source="t"))
    assert [r.key for r in plain] == [r.key for r in iid]
    assert len({r.key for r in grid}) == 3 and grid[0].key == plain[0].key
    assert grid[2].config["non_iid"] == "label-skew(sets=4,skew=0.8)"


def test_cli_bad_setting_is_one_line_exit_2_before_loading(tmp_path, capsys):
    for spec in ("label-skew(sets=100000)", "data-quantity(alpha=-1)"):
        code = main(["train", "fpdgd", "--data", "synthetic:mq2008?queries=50", "--non-iid", spec, "--rounds", "1",
                     "--out", str(tmp_path / "run")])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "--non-iid" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()
    assert main(["audit", "foltr-es", "--data", "synthetic:mq2008", "--non-iid", "click-preference"]) == 2
    assert "--non-iid" in capsys.readouterr().err
