"""Poisoning through the real engine: malicious users click by the poison model while honest users
draw exactly the clicks they would have drawn (common random numbers), model poisoning replaces only
the malicious rows after the client defenses, the round records who was malicious, scoring leaves them
out, and an algorithm that cannot carry an attack refuses it."""

import numpy as np
import pytest

from attacks.poisoning.data import poison_clicks
from attacks.scoring import evaluate
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.synthetic import generate
from fltr_audit.engine.federation import run_round, train
from fltr_audit.engine.schedule import sample_queries
from fltr_audit.engine.training import TrainSettings
from fltr_audit.engine.messages import Guess
from fltr_audit.engine.poisoning import PoisonedClicks
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.spec.poison import parse_poison


def labels(n=4000, k=10, seed=0):
    return np.random.default_rng(seed).integers(-1, 3, size=(n, k))


@pytest.mark.parametrize("base", ["perfect", "navigational", "informational"])
def test_honest_users_draw_the_clicks_they_would_have_drawn(base):
    model = cascade_model(base, 3)
    lab = labels()
    users = np.arange(len(lab))
    poisoned = PoisonedClicks(model, poison_clicks("inverted", 3), np.arange(0, len(lab), 3))
    clicks = poisoned.simulate_users(lab, None, None, users, np.random.default_rng(5))
    clean = model.simulate(lab, np.random.default_rng(5))
    honest = users % 3 != 0
    assert np.array_equal(clicks[honest], clean[honest])  # a planted second draw for honest users fails here
    assert not np.array_equal(clicks[~honest], clean[~honest])


@pytest.mark.parametrize("click", ["inverted", "navigational", "pbm"])
def test_malicious_first_click_frequencies_match_the_poison_model(click):
    poison = poison_clicks(click, 3)
    lab = np.tile(np.array([[2, 1, 0, 0, 2, 1, 2, 0, 1, 0]]), (60_000, 1))
    clicks = PoisonedClicks(cascade_model("perfect", 3), poison, np.arange(60_000)).simulate_users(
        lab, None, None, np.arange(60_000), np.random.default_rng(1))
    p_click, p_stop = poison.tables(10)
    # analytic P(click at i) of the scan: alive_i * c_i, alive_{i+1} = alive_i (1 - c_i s_i)
    alive, expected = 1.0, []
    for i, l in enumerate(lab[0]):
        expected.append(alive * p_click[i, l])
        alive *= 1.0 - p_stop[i, l]
    assert np.allclose(clicks.mean(0), expected, atol=0.01)


def setting(n=20):
    data = generate("mq2008", queries=200, seed=0)
    algo = FPDGD(LinearRanker(data.n_features), cascade_model("perfect", data.n_levels))
    params = np.random.default_rng(0).normal(size=data.n_features) * 0.1
    return data, algo, params, sample_queries(data.n_queries, n, 2, stream(0, "queries", 1)), np.arange(n)


def test_data_poisoning_changes_only_the_malicious_users_clicks_and_is_recorded():
    data, algo, params, queries, ids = setting()
    spec = parse_poison("data-poison(fraction=0.25)")
    attack = spec.build(seed=3, n_levels=data.n_levels)
    _, _, clean, _ = run_round(algo, params, None, data, queries, ids, 1, 9)
    _, _, bad, out = run_round(algo, params, None, data, queries, ids, 1, 9, poisoning=attack)
    mask = bad.truth.private["malicious"]
    assert mask.sum() == 5 and out.round_metrics["malicious_clients"] == 5
    assert np.array_equal(bad.truth.clicks[~mask], clean.truth.clicks[~mask])
    assert not np.array_equal(bad.truth.clicks[mask], clean.truth.clicks[mask])
    assert algo.click_model.name == "perfect"  # the run's algorithm object is not changed


def test_model_poisoning_replaces_only_malicious_rows_after_the_client_defenses():
    from defenses.stack import parse_defense

    data, algo, params, queries, ids = setting()
    stack = parse_defense("clip(sensitivity=0.2)")
    attack = parse_poison("scale(fraction=0.2,factor=50)").build(seed=3, n_levels=3)
    _, _, clean, _ = run_round(algo, params, None, data, queries, ids, 1, 9, defenses=stack)
    _, _, bad, _ = run_round(algo, params, None, data, queries, ids, 1, 9, defenses=stack, poisoning=attack)
    mask = bad.truth.private["malicious"]
    U_clean = clean.view.messages.updates(params)
    U_bad = bad.view.messages.updates(params)
    assert np.array_equal(U_bad[~mask], U_clean[~mask])
    assert np.allclose(U_bad[mask], 50 * U_clean[mask])  # crafted from the clipped update, not clipped again
    assert np.linalg.norm(U_bad[mask], axis=1).min() > 0.1 * 50 * 0.99


def test_scoring_leaves_malicious_clients_out_unless_asked():
    data, algo, params, queries, ids = setting()
    attack = parse_poison("sign-flip(fraction=0.2)").build(seed=3, n_levels=3)
    _, _, batch, _ = run_round(algo, params, None, data, queries, ids, 1, 9, poisoning=attack)
    shape = batch.truth.clicks.shape
    guess = Guess("t", np.random.default_rng(0).random(shape), np.zeros(shape, dtype=bool))
    mask = batch.truth.private["malicious"]
    kept = set(evaluate(guess, batch).per_query["client"])
    assert kept.isdisjoint(ids[mask]) and kept
    assert set(ids[mask]) & set(evaluate(guess, batch, score_malicious=True).per_query["client"])


def test_an_attack_the_algorithm_cannot_carry_is_refused_in_the_engine_too():
    data = generate("mq2008", queries=60, seed=0)
    from fltr_audit.engine.algorithms.foltr_es import FOLtRES

    foltr = FOLtRES(LinearRanker(data.n_features), cascade_model("perfect", 3))
    attack = parse_poison("data-poison(fraction=0.3)").build(seed=0, n_levels=3)
    with pytest.raises(ParameterError, match="does not simulate per-user clicks"):
        run_round(foltr, np.zeros(data.n_features), foltr.init_server_state(np.zeros(data.n_features)), data,
                  sample_queries(data.n_queries, 10, 2, stream(0, "q", 1)), np.arange(10), 1, 0, poisoning=attack)


def test_training_with_poisoning_records_malicious_counts_and_the_setting():
    data, algo, _, _, _ = setting()
    attack = parse_poison("lie(fraction=0.3,who=round)").build(seed=0, n_levels=3)
    settings = TrainSettings(clients=10, queries_per_client=2, rounds=3, seed=0, replace=True)
    res = train(algo, data, settings, poisoning=attack)
    assert list(res.curves["malicious_clients"]) == [3.0, 3.0, 3.0]
    assert res.config["poison"] == "lie(fraction=0.3,who=round)"
    clean = train(algo, data, settings)
    assert "malicious_clients" not in clean.curves and "poison" not in clean.config  # runs without it unchanged
