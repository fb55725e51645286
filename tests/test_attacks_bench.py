"""``bench attacks`` runs and reports; the synthetic round it uses is what it claims to be."""


import numpy as np

from attacks.registry import make_attack
from attacks.synthetic import pdgd_batch, pdgd_like_coefficients, synthetic_batch
from tests.cli_json import cli_result


def test_pdgd_like_coefficients_by_hand():
    clicks = np.array([[0, 1, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=bool)
    coef = pdgd_like_coefficients(clicks, np.random.default_rng(0))
    # clicked > 0; unclicked above the last click and the one just below < 0; the rest 0
    assert (np.sign(coef).tolist()) == [[-1, 1, -1, 1, -1, 0], [0, 0, 0, 0, 0, 0]]


def test_noiseless_synthetic_round_is_recovered_exactly_by_olsr():
    batch = synthetic_batch(200, n_features=46, seed=3)
    guess = make_attack("olsr").guess(batch.view)
    np.testing.assert_array_equal(guess.decision, batch.truth.clicks)


def test_bench_attacks_cli(capsys):
    from fltr_audit.cli import main

    assert main(["bench", "attacks", "--messages", "300", "--features", "46", "--repeats", "1", "--json"]) == 0
    out = cli_result(capsys.readouterr().out)
    assert [r["attack"] for r in out["results"]] == ["olsr", "olsr-l1", "score", "prob", "distance", "bayes"]
    assert out["results"][0]["precision"] > 0.9 and out["target_seconds"] is None
    bayes = out["results"][-1]
    assert bayes["precision"] == 1.0 and bayes["recall"] == 1.0     # noiseless real PDGD steps: exact
    assert set(out["totals"]) == {"olsr+score+prob+distance", "olsr-l1", "bayes"}
    assert main(["bench", "attacks", "--noise", "-1"]) == 2
    assert capsys.readouterr().err.startswith("fltr-audit: error: --noise")
    assert main(["bench", "attacks", "--attack", "bayes,nope"]) == 2
    assert "--attack" in capsys.readouterr().err


def test_pdgd_batch_is_one_real_fpdgd_step_per_message():
    from fltr_audit.engine.algorithms.fpdgd import pdgd_cohort

    batch, algo = pdgd_batch(20, n_features=8, seed=2)
    view = batch.view
    again, shown, clicks = pdgd_cohort(algo.ranker, algo.click_model, view.global_params, view.documents,
                                       view.interactions.queries, np.random.default_rng(0), lr=algo.lr, k=algo.k,
                                       deterministic=True, local_updates=True)
    np.testing.assert_array_equal(shown, view.interactions.shown)
    assert batch.truth.clicks.any() and (~batch.truth.clicks).any()
