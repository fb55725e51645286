"""Scoring against hand-computed confusion counts and scikit-learn's metrics."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score, roc_auc_score, roc_curve

from attacks.scoring import evaluate, leakage_interval, pooled_auc, score_guess, summarize, tpr_at_fpr
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import GroundTruth, Guess, Interactions, RoundBatch, ServerView


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
    slots = evaluate(Guess("x", score, decision), _batch(clicks, shown)).slots
    macro, micro = summarize(pq, slots=slots)
    assert macro["averaging"] == "macro" and micro["averaging"] == "micro"
    np.testing.assert_allclose(macro["precision"], (0.5 + 0 + 2 / 3) / 3)
    np.testing.assert_allclose(micro["precision"], 3 / 5)
    np.testing.assert_allclose(micro["recall"], 3 / 4)
    np.testing.assert_allclose(micro["accuracy"], (1 + 2 + 0 + 5 + 2 + 1) / 14)
    np.testing.assert_allclose(macro["auc"], (0.5 + 0.75) / 2)
    m = shown >= 0   # pooled: every shown slot of every list at once
    np.testing.assert_allclose(micro["auc"], roc_auc_score(clicks[m], score[m]))
    # advantage at the decisions: row 0 1/2 - 1/3, row 2 1 - 1/2; pooled TPR 3/4 - FPR 2/10
    np.testing.assert_allclose(macro["advantage"], ((0.5 - 1 / 3) + 0.5) / 2)
    np.testing.assert_allclose(micro["advantage"], 3 / 4 - 2 / 10)
    assert np.isnan(micro["tpr_at_fpr_0_01"])   # 10 negatives cannot resolve 1 %
    assert np.isnan(macro["leakage"]) and macro["n_counterfactual"] == 0
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


def _random_round(rng, n=60, B=2, k=10, K=7):
    clicks = rng.random((n, B, k)) < 0.3
    shown = np.tile(np.arange(k), (n, B, 1))
    shown[::5, :, 7:] = -1
    clicks &= shown >= 0
    cf = (rng.random((K, n, B, k)) < 0.3) & (shown >= 0)
    score = np.round(rng.normal(size=(n, B, k)), 1)          # rounding makes ties
    decision = (score > 0.2) & (shown >= 0)
    guess = Guess("x", np.where(shown >= 0, score, np.nan), decision)
    return guess, _batch(clicks, shown), cf, score, shown


def test_counterfactual_measures_match_sklearn_per_list_and_pooled():
    rng = np.random.default_rng(3)
    guess, batch, cf, score, shown = _random_round(rng)
    clicks = batch.truth.clicks
    ev = evaluate(guess, batch, counterfactual=cf)
    pq = ev.per_query
    n, B, k = clicks.shape
    for row, (c, b) in enumerate(np.ndindex(n, B)):
        m = shown[c, b] >= 0
        s, d = score[c, b][m], guess.decision[c, b][m]
        aucs, advs = [], []
        for y in cf[:, c, b][:, m]:
            if 0 < y.sum() < len(y):
                aucs.append(roc_auc_score(y, s))
                advs.append(d[y].mean() - d[~y].mean())
        expect_auc = np.mean(aucs) if aucs else np.nan
        expect_adv = np.mean(advs) if advs else np.nan
        np.testing.assert_allclose(pq.loc[row, "auc_counterfactual"], expect_auc)
        np.testing.assert_allclose(pq.loc[row, "advantage_counterfactual"], expect_adv)
        y = clicks[c, b][m]
        real_adv = d[y].mean() - d[~y].mean() if 0 < y.sum() < len(y) else np.nan
        np.testing.assert_allclose(pq.loc[row, "advantage"], real_adv)
    macro, micro = summarize(pq, slots=ev.slots)
    np.testing.assert_allclose(macro["leakage"], np.nanmean(pq["auc"] - pq["auc_counterfactual"]))
    np.testing.assert_allclose(macro["leakage_normalized"], macro["leakage"] / (1 - macro["auc_counterfactual"]))
    m = shown >= 0
    np.testing.assert_allclose(micro["auc"], roc_auc_score(clicks[m], score[m]))
    np.testing.assert_allclose(micro["auc_counterfactual"], np.mean([roc_auc_score(y[m], score[m]) for y in cf]))
    np.testing.assert_allclose(micro["leakage"], micro["auc"] - micro["auc_counterfactual"])
    assert macro["n_counterfactual"] == micro["n_counterfactual"] == len(cf)


def test_pooled_auc_and_tpr_at_fpr_match_sklearn():
    rng = np.random.default_rng(4)
    for trial in range(20):
        m = int(rng.integers(20, 3000))
        score = np.round(rng.normal(size=m), int(rng.integers(0, 3)))
        y = rng.random((3, m)) < rng.uniform(0.05, 0.6)
        np.testing.assert_allclose(pooled_auc(score, y), [roc_auc_score(v, score) for v in y])
        for target in (0.01, 0.001):
            got = tpr_at_fpr(y[0], score, target)
            if (~y[0]).sum() < 1 / target:
                assert np.isnan(got)
                continue
            fpr, tpr, _ = roc_curve(y[0], score)   # brute force: best TPR among points at FPR <= target
            assert got == pytest.approx(tpr[fpr <= target].max())


def test_scores_required_on_shown_slots():
    rng = np.random.default_rng(5)
    guess, batch, cf, score, shown = _random_round(rng)
    bad = guess.score.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(FltrError, match="^attacks: x: outputs no scores"):
        evaluate(Guess("x", bad, guess.decision), batch)


def test_message_blind_guess_has_no_leakage_and_informed_guess_has():
    """Truth and counterfactual from one click model: a guess independent of the truth has
    paired leakage 0 in expectation (one-sided test rejects in about 5 % of seeds); a guess
    that saw the clicks has leakage far above 0."""
    rejections = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n, k, K = 150, 10, 20
        p = np.linspace(0.6, 0.05, k)     # a position-biased click model the prior score matches
        shown = np.tile(np.arange(k), (n, 1, 1))
        clicks = rng.random((n, 1, k)) < p
        cf = rng.random((K, n, 1, k)) < p
        prior = np.broadcast_to(-np.arange(k, dtype=float), (n, 1, k))
        blind = evaluate(Guess("prior", prior, prior > -3), _batch(clicks, shown), counterfactual=cf)
        result = leakage_interval(blind.per_query)
        rejections += result["p_value"] < 0.05
        informed = clicks + 0.5 * rng.random((n, 1, k))
        leak = leakage_interval(evaluate(Guess("x", informed, clicks), _batch(clicks, shown),
                                         counterfactual=cf).per_query)
        assert leak["low"] > 0.1
    # binomial(40, 0.05): P(X > 7) < 0.01
    assert rejections <= 7


def test_leakage_interval_is_the_one_sample_t_test_of_the_paired_differences():
    import pandas as pd
    from scipy import stats

    rng = np.random.default_rng(9)
    auc = rng.uniform(0.3, 1.0, 50)
    cf = rng.uniform(0.3, 0.9, 50)
    auc[[3, 7]] = np.nan                    # lists where the AUC is undefined are left out
    out = leakage_interval(pd.DataFrame({"auc": auc, "auc_counterfactual": cf}), confidence=0.9)
    diff = (auc - cf)[~np.isnan(auc)]
    test = stats.ttest_1samp(diff, 0.0, alternative="greater")
    low, high = stats.t.interval(0.9, len(diff) - 1, loc=diff.mean(), scale=stats.sem(diff))
    assert out["n_lists"] == 48 and out["leakage"] == pytest.approx(diff.mean())
    assert out["p_value"] == pytest.approx(test.pvalue)
    assert (out["low"], out["high"]) == (pytest.approx(low), pytest.approx(high))


def test_rows_of_several_evaluations_equal_the_concatenated_tables():
    """``Evaluation.rows`` (one table from the batches' columns) equals ``pd.concat`` of their
    ``per_query`` tables with a fresh index, dtypes included, with a filter that drops rows
    (min_shown, require_click) and a batch that keeps none.
    Catches: rows out of order, a column cast to another dtype, the filter lost."""
    import pandas as pd

    from attacks.scoring import Evaluation

    rng = np.random.default_rng(8)
    rounds = [_random_round(rng, n=n) for n in (30, 7, 45)]
    evals = [evaluate(g, b, counterfactual=cf, min_shown=8, require_click=True) for g, b, cf, _, _ in rounds]
    empty = evaluate(*rounds[1][:2], min_shown=11)
    assert len(empty.per_query) == 0
    evals.insert(1, evaluate(*rounds[1][:2], counterfactual=rounds[1][2], min_shown=11))
    expected = pd.concat([e.per_query for e in evals], ignore_index=True)
    pd.testing.assert_frame_equal(Evaluation.rows(evals), expected)
    assert 0 < len(expected) < sum(len(r[0].decision.reshape(-1, 10)) for r in rounds)
