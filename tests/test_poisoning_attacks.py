"""Poisoning attacks against independent computations: who is malicious, what each writes (LIE's z
from the normal quantile, IPM, sign flip, scaling, noise), the adaptive attack's choice against a
brute-force search of the aggregator it faces, FOLtR-ES metric reports, and the door (PoisonSpec)."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from attacks.poisoning.adaptive import Adaptive
from attacks.poisoning.catalog import POISONS, check_applies
from attacks.poisoning.data import poison_clicks
from attacks.poisoning.model import IPM, LIE, Noise, Scale, SignFlip, lie_z
from attacks.poisoning.selection import malicious_count, malicious_mask
from defenses.robust.aggregators import Krum, Median
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.aggregation import FedAvg
from fltr_audit.engine.messages import Messages
from fltr_audit.spec.poison import parse_poison


def vectors(n=20, p=5, seed=0, kind="update"):
    U = np.random.default_rng(seed).normal(1.0, 0.3, size=(n, p))
    return U, Messages(n_interactions=np.full(n, 4, dtype=np.int64), vector=U.copy(), vector_kind=kind)


@pytest.mark.parametrize("fraction,n,m", [(0.2, 100, 20), (0.29, 100, 29), (0.3, 10, 3), (0.1, 5, 0), (0.49, 7, 3),
                                          (0.0, 50, 0)])
def test_each_cohort_has_floor_fraction_n_malicious(fraction, n, m):
    ids = np.arange(1000, 1000 + n)
    assert malicious_count(fraction, n) == m
    assert malicious_mask(ids, 1, fraction, "fixed", 0).sum() == m


def test_fixed_keeps_the_same_users_and_round_redraws_them():
    ids = np.arange(100)
    fixed = [malicious_mask(ids, r, 0.2, "fixed", 7) for r in range(1, 6)]
    rounds = [malicious_mask(ids, r, 0.2, "round", 7) for r in range(1, 6)]
    assert all(np.array_equal(f, fixed[0]) for f in fixed)
    assert len({tuple(np.flatnonzero(r)) for r in rounds}) == 5
    # a user's rank does not depend on the cohort's order: the same users, shuffled
    perm = np.random.default_rng(0).permutation(100)
    assert set(ids[perm][malicious_mask(ids[perm], 1, 0.2, "fixed", 7)]) == set(ids[fixed[0]])
    assert not np.array_equal(malicious_mask(ids, 1, 0.2, "fixed", 8), fixed[0])  # the seed matters


@pytest.mark.parametrize("n,m", [(50, 12), (100, 20), (10, 3), (100, 1)])
def test_lie_z_is_baruchs_normal_quantile(n, m):
    s = math.floor(n / 2 + 1) - m
    assert lie_z(n, m) == pytest.approx(max(0.0, norm.ppf((n - s) / n)))
    assert lie_z(50, 12) == pytest.approx(0.5828, abs=1e-4)  # Baruch et al.: n = 50, m = 12 -> z ~ 0.58


def craft(attack, U, msgs, bad, aggregator=None, rng=0):
    out = attack.craft(msgs, bad, np.zeros(U.shape[1]), aggregator or FedAvg(), np.random.default_rng(rng))
    return out.vector


def test_lie_ipm_signflip_scale_write_their_formulas_and_leave_benign_rows_untouched():
    U, msgs = vectors()
    bad = np.zeros(20, dtype=bool)
    bad[[1, 5, 9, 13]] = True
    mu, sigma = U[~bad].mean(0), U[~bad].std(0)
    cases = {
        LIE(0.2): mu - lie_z(20, 4) * sigma,
        LIE(0.2, z=1.5): mu - 1.5 * sigma,
        IPM(0.2, epsilon=0.5): -0.5 * mu,
        SignFlip(0.2, scale=2.0): -2.0 * U[bad],
        Scale(0.2, factor=10.0): 10.0 * U[bad],
    }
    for attack, expected in cases.items():
        out = craft(attack, U, msgs, bad)
        assert np.allclose(out[bad], expected), type(attack).__name__
        assert np.array_equal(out[~bad], U[~bad])  # benign messages unchanged


def test_weights_messages_are_crafted_as_updates():
    g = np.full(5, 3.0)
    U, _ = vectors()
    msgs = Messages(n_interactions=np.full(20, 4), vector=U + g, vector_kind="weights")
    bad = np.arange(20) < 4
    out = IPM(0.2, epsilon=1.0).craft(msgs, bad, g, FedAvg(), np.random.default_rng(0)).vector
    assert np.allclose(out[bad] - g, -U[~bad].mean(0))


def test_noise_has_the_declared_std():
    U, msgs = vectors(n=400, p=50)
    bad = np.arange(400) < 200
    out = craft(Noise(0.4, std=2.0), U, msgs, bad)
    assert (out[bad] - U[bad]).std() == pytest.approx(2.0, rel=0.03)


@pytest.mark.parametrize("aggregator", [FedAvg(), Median(), Krum(f=4)])
@pytest.mark.parametrize("direction", ["std", "unit", "sign"])
def test_adaptive_sends_the_grid_point_of_largest_deviation_of_the_aggregator_it_faces(aggregator, direction):
    U, msgs = vectors(n=20, p=5, seed=2)
    bad = np.arange(20) < 4
    attack = Adaptive(0.2, direction=direction, max_gamma=8.0, steps=12)
    out = craft(attack, U, msgs, bad, aggregator)
    mu, sigma = U[~bad].mean(0), U[~bad].std(0)
    p = {"std": -sigma, "unit": -mu, "sign": -np.sign(mu)}[direction]
    best, best_gamma = -1.0, None
    for j in range(12):  # brute force: every grid point through the aggregator itself
        gamma = 8.0 * 2.0 ** -j
        trial = U.copy()
        trial[bad] = mu + gamma * p
        extra = {"global_params": np.zeros(5)} if aggregator.reads_global_model else {}
        agg = aggregator.aggregate(msgs.replace(vector=trial), np.arange(20), np.random.default_rng(0), **extra)
        dev = np.linalg.norm(agg.mean - mu)
        if dev > best:
            best, best_gamma = dev, gamma
    assert np.allclose(out[bad], mu + best_gamma * p)
    if isinstance(aggregator, FedAvg):
        assert best_gamma == 8.0  # the mean has no bound: the largest perturbation


def test_adaptive_against_the_mean_reverses_it():
    U, msgs = vectors(n=20, p=5, seed=2)
    bad = np.arange(20) < 4
    mean_out = craft(Adaptive(0.2, direction="unit"), U, msgs, bad)
    assert np.dot(mean_out.mean(0), U[~bad].mean(0)) < 0  # the mean points backwards


def test_foltr_metric_reports():
    M = np.random.default_rng(0).choice([0.0, 0.1, 0.5, 1.0], size=(10, 4))
    msgs = Messages(n_interactions=np.full(10, 4), seed=np.arange(10, dtype=np.uint64), metric=M)
    bad = np.arange(10) < 2
    flipped = SignFlip(0.2).craft(msgs, bad, np.zeros(3), FedAvg(), np.random.default_rng(0)).metric
    assert np.allclose(flipped[bad], 1.0 - M[bad]) and np.array_equal(flipped[~bad], M[~bad])
    # reflecting the metric negates the antithetic difference f+ - f- exactly
    diff = lambda x: x[:, :2].mean(1) - x[:, 2:].mean(1)
    assert np.allclose(diff(flipped[bad]), -diff(M[bad]))
    scaled = SignFlip(0.2, scale=4).craft(msgs, bad, np.zeros(3), FedAvg(), np.random.default_rng(0)).metric
    assert np.allclose(diff(scaled[bad]), -4 * diff(M[bad]))
    assert np.allclose(Scale(0.2, factor=3).craft(msgs, bad, np.zeros(3), FedAvg(),
                                                  np.random.default_rng(0)).metric[bad], 3 * M[bad])
    with pytest.raises(ParameterError, match="no part it can write"):
        LIE(0.2).craft(msgs, bad, np.zeros(3), FedAvg(), np.random.default_rng(0))


def test_inverted_click_models():
    inv = poison_clicks("inverted", 3)
    assert np.array_equal(inv.click_prob, [1.0, 0.5, 0.0]) and not inv.stop_prob.any()  # Unlearning-for-FOLTR
    assert np.array_equal(poison_clicks("inverted", 5).click_prob, [1.0, 0.8, 0.6, 0.2, 0.0])
    nav = poison_clicks("navigational", 3)
    assert np.array_equal(nav.click_prob, [0.95, 0.5, 0.05]) and np.array_equal(nav.stop_prob, [0.9, 0.5, 0.2])
    pbm = poison_clicks("pbm", 3)
    assert np.array_equal(pbm.click_prob, [1.0, 0.1, 0.1]) and pbm.gamma == 1.0
    click, stop = pbm.tables(3)
    assert np.allclose(click[:, 0], [1.0, 0.5, 1 / 3]) and not stop.any() and not click[:, -1].any()


@pytest.mark.parametrize("text,canonical", [
    ("lie(fraction=0.2)", "lie(fraction=0.2)"),
    ("sign-flip( fraction = 0.1 , scale=1 )", "sign-flip(fraction=0.1)"),
    ("sign-flip(fraction=0.1,scale=4)", "sign-flip(fraction=0.1,scale=4)"),
    ("data-poison(fraction=0.3,click=pbm,who=round)", "data-poison(fraction=0.3,click=pbm,who=round)"),
    ("adaptive(fraction=0.2,steps=20,direction=std)", "adaptive(fraction=0.2)"),
])
def test_poison_spec_is_canonical_and_hashable(text, canonical):
    spec = parse_poison(text)
    assert spec.text == canonical and parse_poison(canonical) == spec and hash(spec) == hash(parse_poison(canonical))
    assert parse_poison("none") is None and parse_poison(None) is None


@pytest.mark.parametrize("text,pattern", [
    ("lie(fraction=0.5)", r"fraction: must be a number in \[0, 0.5\)"),
    ("lie(fraction=-0.1)", r"fraction: must be a number in \[0, 0.5\)"),
    ("lie", "needs fraction=F"),
    ("lie(fraction=0.2,zz=1)", "no such parameter"),
    ("bogus(fraction=0.2)", "unknown poisoning attack 'bogus'"),
    ("data-poison(fraction=0.2,click=weird)", "click: must be one of"),
    ("lie(fraction=0.2,fraction=0.1)", "given twice"),
    ("lie(fraction=0.2", "malformed"),
])
def test_bad_poison_is_one_line_naming_poison(text, pattern):
    with pytest.raises(ParameterError, match=pattern) as info:
        parse_poison(text)
    assert info.value.parameter == "poison" and "\n" not in str(info.value)


def test_every_parameter_but_fraction_has_a_default():
    for attack in POISONS.values():
        assert all(p.name == "fraction" or p.name in ("who", "z") or p.default is not None for p in attack.parameters)
        parse_poison(f"{attack.name}(fraction=0.2)")


@pytest.mark.parametrize("name,algorithm,kind,user_clicks,ok", [
    ("data-poison", "fpdgd", "weights", True, True),
    ("data-poison", "foltr-es", "seed+metric", False, False),
    ("lie", "foltr-es", "seed+metric", False, False),
    ("sign-flip", "foltr-es", "seed+metric", False, True),
    ("adaptive", "fedips", "update", False, True),
])
def test_an_attack_applies_only_where_the_messages_carry_it(name, algorithm, kind, user_clicks, ok):
    if ok:
        check_applies(name, algorithm, kind, user_clicks)
        return
    with pytest.raises(ParameterError) as info:
        check_applies(name, algorithm, kind, user_clicks)
    assert info.value.parameter == "poison" and name in str(info.value) and algorithm in str(info.value)
