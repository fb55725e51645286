"""``bench attacks`` runs and reports; the synthetic round it uses is what it claims to be."""

import json

import numpy as np

from attacks.registry import make_attack
from attacks.synthetic import pdgd_like_coefficients, synthetic_batch


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
    out = json.loads(capsys.readouterr().out)
    assert [r["attack"] for r in out["results"]] == ["olsr", "score", "prob", "distance"]
    assert out["results"][0]["precision"] > 0.9 and out["target_seconds"] is None
    assert main(["bench", "attacks", "--noise", "-1"]) == 2
    assert capsys.readouterr().err.startswith("fltr-audit: error: --noise")
