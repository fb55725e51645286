"""Heuristics (aligned and as-published) and random-k on hand-constructed score changes."""

import numpy as np
import pytest

from attacks.heuristics import Heuristic
from attacks.random_k import RandomK
from attacks.registry import ATTACKS, make_attack
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Interactions, Messages, ServerView
from fltr_audit.engine.rankers import LinearRanker


def _identity_view(global_w, updates, shown=None, secagg=False):
    """Documents are unit vectors, so f(d) = w_d: the scores are the weights themselves."""
    updates = np.atleast_2d(np.asarray(updates, dtype=np.float64))
    F = len(global_w)
    n = len(updates)
    g = np.asarray(global_w, dtype=np.float64)
    shown = np.tile(np.arange(F), (n, 1))[:, None, :] if shown is None else shown
    data = Dataset(features=np.eye(F, dtype=np.float32), labels=np.zeros(F, np.int8),
                   query_ptr=np.array([0, F]), qids=np.array([1]), n_levels=3)
    msgs = Messages(n_interactions=np.ones(n, np.int64), vector=g + updates)
    return ServerView(
        round=3, threat_model="server", global_params=g, ranker=LinearRanker(F),
        participants=np.arange(n), dropouts=np.empty(0, np.int64),
        messages=None if secagg else msgs, aggregate=(g + updates).mean(0),
        interactions=Interactions(queries=np.zeros(shown.shape[:2], np.int64), shown=shown), documents=data,
    )


# global f = [4, 3, 2, 1] (the shown order), update u = [-2, 0.5, 3, -0.5], so f' = [2, 3.5, 5, 0.5]
G, U = [4.0, 3.0, 2.0, 1.0], [-2.0, 0.5, 3.0, -0.5]


def test_aligned_heuristics_by_hand():
    view = _identity_view(G, U)
    # higher score: f' > f exactly where u > 0
    assert make_attack("score").guess(view).decision[0, 0].tolist() == [False, True, True, False]
    # softmax(f) = [.644, .237, .087, .032], softmax(f') = [.039, .174, .779, .009]
    prob = make_attack("prob").guess(view)
    assert prob.decision[0, 0].tolist() == [False, False, True, False]
    np.testing.assert_allclose(prob.score[0, 0, 2], 0.7788 - 0.0871, atol=1e-3)
    # distance counts #{j: u_i > u_j} = [0, 2, 3, 1]
    dist = Heuristic("distance", threshold=1).guess(view)
    assert dist.score[0, 0].tolist() == [0, 2, 3, 1]
    assert dist.decision[0, 0].tolist() == [False, True, True, False]
    assert Heuristic("distance", threshold=2).guess(view).decision[0, 0].tolist() == [False, False, True, False]


def test_as_published_compares_misaligned_vectors_by_hand():
    view = _identity_view(G, U)
    # f' in new-ranking order = [5, 3.5, 2, 0.5] against f in shown order [4, 3, 2, 1]
    assert make_attack("score-as-published").guess(view).decision[0, 0].tolist() == [True, True, False, False]
    # softmax: [.779, .174, .039, .009] vs [.644, .237, .087, .032]
    assert make_attack("prob-as-published").guess(view).decision[0, 0].tolist() == [True, False, False, False]
    # differences e = [1, .5, 0, -.5] -> counts [3, 2, 1, 0]; published rule: count >= threshold
    pub = Heuristic("distance", threshold=2, as_published=True).guess(view)
    assert pub.score[0, 0].tolist() == [3, 2, 1, 0]
    assert pub.decision[0, 0].tolist() == [True, True, False, False]


def test_distance_rule_guess_counts_on_lists_of_ten():
    """With distinct score changes the aligned '> 5' rule guesses exactly 4 of 10 documents and
    the published '>= 5' rule exactly 5, whatever the clicks (the issue's observation)."""
    rng = np.random.default_rng(0)
    g = rng.normal(size=10)
    view = _identity_view(g, rng.normal(size=(50, 10)))
    assert (make_attack("distance").guess(view).decision.sum(-1) == 4).all()
    assert (make_attack("distance-as-published").guess(view).decision.sum(-1) == 5).all()


def test_empty_slots_and_secure_aggregation():
    shown = np.array([[[0, 1, 2, -1]], [[3, 2, 1, 0]]])
    view = _identity_view(G, [U, [1.0, -1.0, 0.0, 0.0]], shown=shown)
    for name in ("score", "prob", "distance", "score-as-published"):
        g = make_attack(name).guess(view)
        assert np.isnan(g.score[0, 0, 3]) and not g.decision[0, 0, 3]
    # client 0 sees docs 0,1,2 with u = [-2, .5, 3]: softmax over the three shown only
    prob = make_attack("prob").guess(view)
    f, fp = np.array(G[:3]), np.array(G[:3]) + np.array(U[:3])
    expect = np.exp(fp) / np.exp(fp).sum() - np.exp(f) / np.exp(f).sum()
    np.testing.assert_allclose(prob.score[0, 0, :3], expect)
    # secure aggregation: f' is the aggregate model, the mean update [-0.5, -0.25, 1.5, -0.25]
    agg = make_attack("score").guess(_identity_view(G, [U, [1.0, -1.0, 0.0, 0.0]], shown=shown, secagg=True))
    assert agg.decision[1, 0].tolist() == [False, True, False, False]    # docs 3, 2, 1, 0 in that order
    assert agg.decision[0, 0].tolist() == [False, False, True, False]


def test_random_k_guesses_k_valid_slots_reproducibly():
    shown = np.array([[[0, 1, 2, 3]], [[0, 1, -1, -1]]])
    view = _identity_view(G, np.zeros((2, 4)), shown=shown)
    a = RandomK(3, seed=5).guess(view)
    assert a.decision[0, 0].sum() == 3 and a.decision[1, 0].tolist()[:2] == [True, True]
    assert not a.decision[1, 0, 2:].any()
    np.testing.assert_array_equal(a.decision, RandomK(3, seed=5).guess(view).decision)
    # uniform over the valid slots: every slot of a 4-list is picked 3/4 of the time
    big = _identity_view(G, np.zeros((4000, 4)))
    freq = make_attack("random3", seed=1).guess(big).decision.mean(axis=(0, 1))
    np.testing.assert_allclose(freq, 0.75, atol=0.03)   # binomial sd 0.007: 4 sd margin


def test_registry_names_and_errors():
    assert set(ATTACKS) >= {"olsr", "olsr-t", "score", "prob", "distance", "random3", "random4",
                            "score-as-published", "prob-as-published", "distance-as-published"}
    for name in ATTACKS:
        assert make_attack(name).name == name
    with pytest.raises(FltrError, match="^attack distance: threshold: must be an integer >= 0, got -1$"):
        make_attack("distance", threshold=-1)
    with pytest.raises(FltrError, match="^attacks: random3: bad parameters"):
        make_attack("random3", bogus=1)


def test_distance_orders_every_list_as_score_does():
    """Why ``score`` and ``distance`` gave identical AUC on every list: the distance count is the
    within-list rank of the score change. Brute force on random lists (ties included): the count
    equals #{j != i valid : delta_i > delta_j}, so the per-list Mann-Whitney AUC of both is equal
    for any clicks. A distance rule that compared raw f' differences would fail this."""
    from attacks.heuristics import heuristic_scores

    rng = np.random.default_rng(5)
    for _ in range(50):
        new, old = rng.integers(0, 4, size=(2, 10)).astype(float)
        mask = np.ones(10, dtype=bool)
        mask[rng.integers(6, 11):] = False
        delta = heuristic_scores("score", new, old, mask)
        count = heuristic_scores("distance", new, old, mask)
        valid = np.flatnonzero(mask)
        for i in valid:
            assert count[i] == sum(delta[i] > delta[j] for j in valid if j != i)
        clicks = rng.random(len(valid)) < 0.4
        if clicks.any() and not clicks.all():
            def auc(s):
                pos, neg = s[valid][clicks], s[valid][~clicks]
                return np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg])
            assert auc(count) == auc(delta)
