"""Attacks on FOLtR-ES messages: decoding the first click, distinguishing queries, seed replay."""

import numpy as np
import pytest

from attacks.foltr_decode import (
    FoltrDecode, SeedReplay, audit_query_distinguishing, distinguish_queries, first_click_positions,
    log_likelihood_ratio,
)
from attacks.registry import make_attack
from attacks.scoring import score_guess
from defenses.randomized_response import RandomizedResponse
from fltr_audit.engine.algorithms.foltr_es import FOLtRES
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.federation import run_round
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.engine.aggregation import RoundDefenses


def data_10plus(n_queries=40, seed=0):
    """Every query has at least 10 documents, so every MaxRR value names a shown slot."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(10, 30, n_queries)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return Dataset(features=rng.random((ptr[-1], 5)).astype(np.float32),
                   labels=rng.integers(0, 3, ptr[-1]).astype(np.int8), query_ptr=ptr,
                   qids=np.arange(n_queries), n_levels=3)


def one_round(algo, data, defenses=(), clients=2000, B=4, seed=0):
    params = np.random.default_rng(seed).normal(size=algo.ranker.n_params)
    queries = np.random.default_rng(seed + 1).integers(0, data.n_queries, (clients, B))
    _, _, batch, _ = run_round(algo, params, algo.init_server_state(params), data, queries, np.arange(clients), 1,
                               seed, defenses=RoundDefenses(client=tuple(defenses)))
    return batch


def first_click_onehot(clicks):
    first = np.where(clicks.any(-1), clicks.argmax(-1), -1)
    return np.arange(clicks.shape[-1]) == first[..., None]


def test_first_click_positions():
    np.testing.assert_array_equal(first_click_positions(np.array([1.0, 0.5, 1 / 3, 0.1, 0.0])), [0, 1, 2, 9, -1])


def test_decoding_recovers_the_first_click_without_privatization():
    data = data_10plus()
    algo = FOLtRES(LinearRanker(5), cascade_model("informational", 3))
    batch = one_round(algo, data)
    guess = FoltrDecode().guess(batch.view)
    np.testing.assert_array_equal(guess.decision, first_click_onehot(batch.truth.clicks))
    # blind server: same decisions from the metric alone
    np.testing.assert_array_equal(FoltrDecode().guess(batch.view.blind()).decision, guess.decision)
    table = score_guess(guess, batch)
    assert table["precision"][table["n_clicked"] > 0].min() == 1.0   # every guessed click is real


def test_decoding_accuracy_falls_with_p_as_randomized_response_predicts():
    """The decoded first click is right exactly when RR kept the true value: probability p.
    8,000 interactions per p: standard error <= 0.0056; we allow 0.03 (over 5 SE)."""
    data = data_10plus()
    algo = FOLtRES(LinearRanker(5), cascade_model("informational", 3))
    rates, accuracies = [], []
    for p in (1.0, 0.9, 0.5, 0.25):
        batch = one_round(algo, data, defenses=(RandomizedResponse(p),), seed=3)
        guess = FoltrDecode().guess(batch.view)
        exact = (guess.decision == first_click_onehot(batch.truth.clicks)).all(-1)
        rates.append(exact.mean())
        assert exact.mean() == pytest.approx(p, abs=0.03)
        accuracies.append(score_guess(guess, batch)["accuracy"].mean())
    assert rates[0] == 1.0
    assert all(a > b for a, b in zip(accuracies, accuracies[1:]))


def test_likelihood_ratio_by_hand():
    model = cascade_model("perfect", 3)
    q1, q2 = np.full(10, 2), np.zeros(10, dtype=int)   # always first click at 1 / never a click
    p = 0.8
    llr = log_likelihood_ratio(np.array([1.0, 0.0, 0.5]), q1, q2, model, p)
    bound = np.log(p * 10 / (1 - p))
    np.testing.assert_allclose(llr, [bound, -bound, 0.0], atol=1e-12)
    np.testing.assert_array_equal(distinguish_queries(np.array([1.0, 0.0, 0.5]), q1, q2, model, p), [True, False, False])


@pytest.mark.parametrize("name", ["perfect", "navigational"])
def test_empirical_epsilon_of_the_distinguishing_test(name):
    """The audit's lower bound never exceeds the exact enumerated epsilon, and its point
    estimate is close to it: the best test decides on the single maximizing value, whose
    rates (about p and (1-p)/10 at p = 0.9) are measured on 10,000 trials per query."""
    model = cascade_model(name, 3)
    res = audit_query_distinguishing(RandomizedResponse(0.9), model, n_trials=20_000, seed=1)
    assert res["epsilon_lb"] <= res["epsilon_enumerated"] + 1e-9
    assert res["epsilon_point"] == pytest.approx(res["epsilon_enumerated"], abs=0.3)
    assert res["epsilon_enumerated"] <= res["epsilon_theoretical"] + 1e-9
    assert res["claim_verdict"] == "consistent"


def test_seed_replay_reproduces_a_flawed_client_only():
    data = data_10plus()
    model = cascade_model("navigational", 3)
    flawed = FOLtRES(LinearRanker(5), model, flawed_seeding=True)
    batch = one_round(flawed, data, clients=300)
    attack = SeedReplay(flawed)
    queries, _, _ = attack.replay(batch.view)
    np.testing.assert_array_equal(queries, batch.view.interactions.queries)
    np.testing.assert_array_equal(attack.guess(batch.view).decision, batch.truth.clicks)

    sound = FOLtRES(LinearRanker(5), model)
    batch = one_round(sound, data, clients=300)
    queries, _, _ = SeedReplay(sound).replay(batch.view)
    # independent draws: queries agree at rate 1/40 (1,200 draws: expected 30, well below 120)
    assert (queries == batch.view.interactions.queries).sum() < 120
    assert not np.array_equal(SeedReplay(sound).guess(batch.view).decision, batch.truth.clicks)


def test_attack_factory_and_missing_inputs():
    algo = FOLtRES(LinearRanker(5), cascade_model("perfect", 3))
    assert make_attack("foltr-decode", k=algo.k).name == "foltr-decode"
    assert make_attack("seed-replay", algorithm=algo).algorithm is algo
    batch = one_round(algo, data_10plus(), clients=10)
    with pytest.raises(FltrError, match="seed-replay"):
        SeedReplay(algo).guess(batch.view.blind())
