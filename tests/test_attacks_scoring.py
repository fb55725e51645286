"""Scoring against hand-computed confusion counts and scikit-learn's metrics."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score, roc_auc_score

from attacks.scoring import score_guess, summarize
from fltr_audit.errors import FltrError
from fltr_audit.messages import GroundTruth, Guess, Interactions, RoundBatch, ServerView


def _batch(clicks, shown):
    n, B, k = clicks.shape
    view = ServerView(
        round=0, threat_model="server", global_params=np.zeros(1), ranker=None,
        participants=np.arange(n), dropouts=np.empty(0, np.int64), messages=None, aggregate=None,
        interactions=Interactions(queries=np.arange(n * B).reshape(n, B), shown=shown), documents=None,
    )
    return RoundBatch(view=view, truth=GroundTruth(clicks=clicks, client_ids=np.arange(10, 10 + n)))


def test_hand_counts():
    clicks = np.array([[[1, 0, 1, 0, 0]], [[0, 0, 0, 0, 0]], [[1, 1, 0, 0, 0]]], dtype=bool)
    shown = np.tile(np.arange(5), (3, 1, 1))
    shown[2, 0, 4] = -1
    decision = np.array([[[1, 1, 0, 0, 0]], [[0, 0, 0, 0, 0]], [[1, 1, 1, 0, 1]]], dtype=bool)  # last slot empty
    score = np.array([[[.9, .8, .1, .2, .3]], [[.5, .4, .3, .2, .1]], [[.7, .2, .6, .1, np.nan]]])
    pq = score_guess(Guess("x", score, decision), _batch(clicks, shown))
    assert pq[["tp", "fp", "tn", "fn"]].values.tolist() == [[1, 1, 2, 1], [0, 0, 5, 0], [2, 1, 1, 0]]
    assert pq["client"].tolist() == [10, 11, 12] and pq["query"].tolist() == [0, 1, 2]
    assert pq["n_shown"].tolist() == [5, 5, 4] and pq["n_clicked"].tolist() == [2, 0, 2]
    # row 0: precision 1/2, recall 1/2; row 1: no guess, no click -> 0 and 0; row 2: 2/3 and 1
    np.testing.assert_allclose(pq["precision"], [0.5, 0.0, 2 / 3])
    np.testing.assert_allclose(pq["recall"], [0.5, 0.0, 1.0])
    # AUC row 0: positives .9, .1 vs negatives .8, .2, .3 -> (3 + 0) / 6; row 1 undefined;
    # row 2: positives .7, .2 vs negatives .6, .1 -> (2 + 1) / 4
    np.testing.assert_allclose(pq["auc"], [0.5, np.nan, 0.75])
    macro, micro = summarize(pq)
    assert macro["averaging"] == "macro" and micro["averaging"] == "micro"
    np.testing.assert_allclose(macro["precision"], (0.5 + 0 + 2 / 3) / 3)
    np.testing.assert_allclose(micro["precision"], 3 / 5)
    np.testing.assert_allclose(micro["recall"], 3 / 4)
    np.testing.assert_allclose(micro["accuracy"], (1 + 2 + 0 + 5 + 2 + 1) / 14)
    np.testing.assert_allclose(macro["auc"], (0.5 + 0.75) / 2)
    np.testing.assert_allclose(micro["auc"], (0.5 * 6 + 0.75 * 4) / 10)   # pairs pooled within lists
    assert macro["n_queries"] == 3 and macro["zero_division"] == "0"
    # Pham's filter: lists of at least 5 with a click
    kept = score_guess(Guess("x", score, decision), _batch(clicks, shown), min_shown=5, require_click=True)
    assert kept["client"].tolist() == [10]
    # the skip policy leaves the no-guess / no-click query out of precision and recall means
    skip = summarize(pq, zero_division="skip")[0]
    np.testing.assert_allclose(skip["precision"], (0.5 + 2 / 3) / 2)
    with pytest.raises(FltrError):
        summarize(pq, zero_division="nan")


def test_matches_sklearn_per_query():
    rng = np.random.default_rng(0)
    n, B, k = 40, 2, 10
    clicks = rng.random((n, B, k)) < 0.3
    shown = np.tile(np.arange(k), (n, B, 1))
    shown[::7, :, 8:] = -1
    clicks &= shown >= 0
    score = np.round(rng.normal(size=(n, B, k)), 1)          # rounding makes ties
    decision = (score > 0.3) & (shown >= 0)
    pq = score_guess(Guess("x", np.where(shown >= 0, score, np.nan), decision), _batch(clicks, shown))
    for row, (c, b) in enumerate(np.ndindex(n, B)):
        m = shown[c, b] >= 0
        y, d, s = clicks[c, b][m], decision[c, b][m], score[c, b][m]
        assert pq.loc[row, "precision"] == pytest.approx(precision_score(y, d, zero_division=0))
        assert pq.loc[row, "recall"] == pytest.approx(recall_score(y, d, zero_division=0))
        assert pq.loc[row, "f1"] == pytest.approx(f1_score(y, d, zero_division=0))
        assert pq.loc[row, "accuracy"] == pytest.approx(accuracy_score(y, d))
        if 0 < y.sum() < len(y):
            assert pq.loc[row, "auc"] == pytest.approx(roc_auc_score(y, s))
        else:
            assert np.isnan(pq.loc[row, "auc"])
    micro = summarize(pq)[1]
    m = shown >= 0
    assert micro["precision"] == pytest.approx(precision_score(clicks[m], decision[m]))
    assert micro["recall"] == pytest.approx(recall_score(clicks[m], decision[m]))
    assert micro["f1"] == pytest.approx(f1_score(clicks[m], decision[m]))
