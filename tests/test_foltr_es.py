"""FOLtR-ES: seeds and perturbations, the ES gradient, the client and server steps, learning."""

import numpy as np
import pytest
from scipy import stats

from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms.evolution_strategies import es_gradient, flawed_client_draws, perturbations
from fltr_audit.engine.algorithms.foltr_es import FOLtRES
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Messages, ServerView
from fltr_audit.engine.rankers import LinearRanker, MLPRanker
from fltr_audit.engine.training import TrainSettings
from tests.cli_json import cli_result


def toy_data(n_queries=30, n_features=5, seed=0, min_docs=3, max_docs=25):
    rng = np.random.default_rng(seed)
    counts = rng.integers(min_docs, max_docs + 1, n_queries)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    X = rng.random((ptr[-1], n_features)).astype(np.float32)
    labels = rng.integers(0, 3, ptr[-1]).astype(np.int8)
    return Dataset(features=X, labels=labels, query_ptr=ptr, qids=np.arange(n_queries), n_levels=3, name="toy")


def view_of(out, params, ranker, data, messages=None):
    n = out.messages.n_clients
    return ServerView(round=1, threat_model="server", global_params=params, ranker=ranker,
                      participants=np.arange(n), dropouts=np.empty(0, np.int64),
                      messages=out.messages if messages is None else messages, aggregate=None,
                      interactions=out.interactions, documents=data)


def test_perturbation_depends_on_the_seed_alone():
    seeds = np.random.default_rng(1).integers(0, 2**64, 50, dtype=np.uint64)
    V = perturbations(seeds, 17)
    # each row is regenerated from its seed alone, whatever else is in the cohort
    for i in (0, 7, 49):
        np.testing.assert_array_equal(perturbations(seeds[i:i + 1], 17)[0], V[i])
    np.testing.assert_array_equal(perturbations(seeds[::-1], 17)[::-1], V)
    # a longer vector extends the shorter one (coordinate j depends on (seed, j) only)
    np.testing.assert_array_equal(perturbations(seeds, 40)[:, :17], V)


def test_perturbations_are_standard_normal_and_independent():
    seeds = np.arange(4000, dtype=np.uint64)   # consecutive seeds: the worst case for a weak mixer
    V = perturbations(seeds, 30)
    # KS test against N(0, 1) on 120k values; fails with probability 1e-4 when correct
    assert stats.kstest(V.ravel(), "norm").pvalue > 1e-4
    # correlations between coordinates and between neighbouring seeds: |r| < 4.5/sqrt(n)
    C = np.corrcoef(V.T)
    assert np.abs(C[np.triu_indices(30, 1)]).max() < 4.5 / np.sqrt(4000)
    r_seeds = np.corrcoef(V[:-1].ravel(), V[1:].ravel())[0, 1]
    assert abs(r_seeds) < 4.5 / np.sqrt(V.size)


def test_server_regenerates_the_clients_perturbation_from_the_seed():
    """The shown lists are exactly the deterministic top 10 of phi +- sigma v_s, where v_s is
    what the server computes from the seed in the message (brute force per interaction)."""
    data = toy_data()
    for ranker in (LinearRanker(5), MLPRanker(5)):
        algo = FOLtRES(ranker, cascade_model("navigational", 3), sigma=0.3)
        params = np.random.default_rng(3).normal(size=ranker.n_params)
        queries = np.random.default_rng(4).integers(0, data.n_queries, (12, 4))
        out = algo.client_step(params, data, queries, np.arange(12), np.random.default_rng(5),
                               np.random.default_rng(6))
        for c in range(12):
            v = perturbations(out.messages.seed[c:c + 1], ranker.n_params)[0]
            for b in range(4):
                theta = params + (1 if b < 2 else -1) * 0.3 * v
                rows = np.arange(*data.query_rows(int(queries[c, b])).indices(data.n_docs))
                s = ranker.score(theta, data.features[rows])
                expect = rows[np.argsort(-s, kind="stable")][:10]
                got = out.interactions.shown[c, b]
                np.testing.assert_array_equal(got[got >= 0], expect)
                assert (got >= 0).sum() == min(10, len(rows))


def test_client_messages_and_round_metric():
    data = toy_data()
    algo = FOLtRES(LinearRanker(5), cascade_model("informational", 3))
    out = algo.client_step(np.zeros(5), data, np.zeros((20, 4), np.int64) + 3, np.arange(20),
                           np.random.default_rng(0), np.random.default_rng(1))
    m = out.messages
    assert m.vector is None and m.seed.dtype == np.uint64 and m.metric.shape == (20, 4)
    np.testing.assert_array_equal(m.n_interactions, 4)
    np.testing.assert_array_equal(m.metric, metrics.max_rr(out.clicks))
    assert out.round_metrics["batch_maxrr"] == pytest.approx(m.metric.mean())
    assert not out.clicks[~out.interactions.mask].any()


def test_private_choices_do_not_depend_on_the_public_seed():
    data = toy_data()
    algo = FOLtRES(LinearRanker(5), cascade_model("informational", 3))
    q = np.random.default_rng(0).integers(0, data.n_queries, (200, 2))
    a = algo.client_step(np.ones(5), data, q, np.arange(200), np.random.default_rng(7), np.random.default_rng(1))
    b = algo.client_step(np.ones(5), data, q, np.arange(200), np.random.default_rng(8), np.random.default_rng(1))
    np.testing.assert_array_equal(a.messages.seed, b.messages.seed)
    np.testing.assert_array_equal(a.interactions.shown, b.interactions.shown)
    assert (a.clicks != b.clicks).any()          # same seeds, different private click draws


def test_flawed_seeding_draws_queries_from_the_seed():
    data = toy_data()
    algo = FOLtRES(LinearRanker(5), cascade_model("perfect", 3), flawed_seeding=True)
    out = algo.client_step(np.zeros(5), data, np.zeros((30, 4), np.int64), np.arange(30),
                           np.random.default_rng(0), np.random.default_rng(1))
    q, _ = flawed_client_draws(out.messages.seed, data.n_queries, 4, 10)
    np.testing.assert_array_equal(out.interactions.queries, q)
    assert len(np.unique(q)) > 1


def quadratic_metric(seeds, phi, a, sigma, B, antithetic, noise_rng):
    """f(theta) = -||theta - a||^2 + noise for the B interactions of each client."""
    V = perturbations(seeds, len(phi))
    sgn = np.where(np.arange(B) < (B + 1) // 2, 1.0, -1.0) if antithetic else np.ones(B)
    theta = phi + sigma * sgn[None, :, None] * V[:, None, :]
    f = -((theta - a) ** 2).sum(-1) + noise_rng.normal(0, 0.1, (len(seeds), B))
    return V, f


@pytest.mark.parametrize("antithetic,B", [(False, 4), (True, 4), (True, 3), (True, 1)])
def test_es_gradient_is_unbiased_on_a_quadratic(antithetic, B):
    """For F(theta) = -||theta - a||^2 the Gaussian-smoothed objective has gradient exactly
    -2 (phi - a). Per-client estimates are i.i.d., so their mean is within a few standard
    errors of it: |z| < 4.5 on each of 4 coordinates (false alarm < 3e-5). Odd B puts
    ceil(B/2) interactions on the + side; B = 1 falls back to the one-sided estimate."""
    phi, a, sigma = np.array([0.3, -0.2, 0.1, 0.0]), np.array([0.5, 0.5, -0.5, 0.2]), 0.1
    seeds = np.random.default_rng(11).integers(0, 2**64, 40_000, dtype=np.uint64)
    V, f = quadratic_metric(seeds, phi, a, sigma, B, antithetic, np.random.default_rng(12))
    per_client = np.stack([es_gradient(V[i:i + 1], f[i:i + 1], sigma, antithetic) for i in range(0, 400)])
    assert per_client.shape == (400, 4)
    # the vectorized estimate is the mean of the per-client ones
    np.testing.assert_allclose(es_gradient(V[:400], f[:400], sigma, antithetic), per_client.mean(0), rtol=1e-10)
    h = (B + 1) // 2
    w = ((f[:, :h].mean(1) - f[:, h:].mean(1)) / 2) if antithetic and B > 1 else f.mean(1)
    samples = w[:, None] * V / sigma
    g = es_gradient(V, f, sigma, antithetic)
    se = samples.std(0, ddof=1) / np.sqrt(len(seeds))
    z = (g - (-2 * (phi - a))) / se
    assert np.abs(z).max() < 4.5, z


def test_antithetic_variates_lower_the_variance():
    phi, a, sigma = np.array([0.3, -0.2, 0.1, 0.0]), np.array([0.5, 0.5, -0.5, 0.2]), 0.1
    seeds = np.random.default_rng(13).integers(0, 2**64, 20_000, dtype=np.uint64)
    var = {}
    for anti in (False, True):
        V, f = quadratic_metric(seeds, phi, a, sigma, 4, anti, np.random.default_rng(14))
        w = ((f[:, :2].mean(1) - f[:, 2:].mean(1)) / 2) if anti else f.mean(1)
        var[anti] = (w[:, None] * V / sigma).var(0).sum()
    # plain ES carries F(phi) v / sigma (F(phi) = -0.71 here), antithetic cancels it: the
    # per-client variance drops by far more than the factor 2 demanded here
    assert var[True] < 0.5 * var[False]


def test_server_step_is_an_adam_ascent_step_on_the_es_gradient():
    data = toy_data()
    ranker = LinearRanker(5)
    algo = FOLtRES(ranker, cascade_model("informational", 3), lr=0.01)
    params = np.zeros(5)
    out = algo.client_step(params, data, np.random.default_rng(0).integers(0, 30, (100, 4)), np.arange(100),
                           np.random.default_rng(1), np.random.default_rng(2))
    new, state = algo.server_step(params, algo.init_server_state(params), view_of(out, params, ranker, data))
    V = np.stack([perturbations(np.array([s], np.uint64), 5)[0] for s in out.messages.seed])
    f = out.messages.metric
    g = ((f[:, :2].mean(1) - f[:, 2:].mean(1)) / 2) @ V / (100 * 0.01)
    # first Adam step: m_hat = g, v_hat = g^2, so the step is lr * g / (|g| + eps)
    np.testing.assert_allclose(new, 0.01 * g / (np.abs(g) + 1e-8), rtol=1e-9)
    assert state.t == 1


def test_bad_parameters_and_hidden_messages():
    with pytest.raises(FltrError, match="^sigma: "):
        FOLtRES(LinearRanker(5), cascade_model("perfect", 3), sigma=0)
    algo = FOLtRES(LinearRanker(5), cascade_model("perfect", 3))
    np.testing.assert_array_equal(algo.signs(3), [1, 1, -1])
    np.testing.assert_array_equal(algo.signs(1), [1])
    data = toy_data()
    out = algo.client_step(np.zeros(5), data, np.zeros((3, 2), np.int64), np.arange(3),
                           np.random.default_rng(0), np.random.default_rng(1))
    hidden = view_of(out, np.zeros(5), algo.ranker, data, messages=Messages(n_interactions=np.full(3, 2)))
    with pytest.raises(FltrError, match="seed"):
        algo.server_step(np.zeros(5), algo.init_server_state(np.zeros(5)), hidden)


@pytest.mark.mq2008
def test_learning_on_mq2008_perfect(mq2008_dir):
    """2,000 clients x B = 4, antithetic, perfect clicks: mean batch MaxRR rises clearly.

    The published code goes from 0.26 in round 1 to about 0.41 by round 80
    (REFERENCE-FIGURES.md); after 15 rounds we ask for a rise of 0.05 from the first two
    rounds to the last two (each a mean over 16,000 interactions, standard error < 0.004).
    """
    from fltr_audit.engine.data.letor import read_letor
    from fltr_audit.engine.federation import train

    data = read_letor(mq2008_dir / "Fold1" / "train.txt")
    algo = FOLtRES(LinearRanker(data.n_features), cascade_model("perfect", 3))
    res = train(algo, data, TrainSettings(clients=2000, queries_per_client=4, rounds=15, seed=0, replace=True))
    curve = res.curves["batch_maxrr"].to_numpy()
    assert curve[-2:].mean() - curve[:2].mean() > 0.05, curve


def test_cli_train_foltr_es_writes_outputs_and_rejects_bad_input(tmp_path, capsys):

    from fltr_audit.cli import main

    out = tmp_path / "run"
    argv = ["train", "foltr-es", "--data", "synthetic:mq2008?queries=120", "--clients", "50", "--rounds", "3",
            "--defense", "rr(p=0.9)", "--out", str(out), "--json", "--quiet"]
    assert main(argv) == 0
    result = cli_result(capsys.readouterr().out)
    assert result["defense"] == "rr(p=0.9)" and result["n_interactions"] == 3 * 50 * 4
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "curves.csv", "model.npy"]
    curves = (out / "curves.csv").read_text().splitlines()
    assert "batch_maxrr" in curves[0] and "expected_maxrr_test" in curves[0] and len(curves) == 4
    bad = argv[:-4] + ["--sigma", "0", "--out", str(tmp_path / "bad"), "--quiet"]
    assert main(bad) == 2
    assert "--sigma" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("n_threads", [1, 3])
def test_shown_lists_are_each_interactions_top_k_by_its_perturbed_model(monkeypatch, n_threads):
    """Brute force per interaction: score the query's rows under ``params + sign * sigma * v``,
    take the top k by score (ties by position), -1 padded (catches lists put back in the wrong
    order, and parts of the queries on threads ranking rows outside their part)."""
    from fltr_audit.engine import threads

    monkeypatch.setattr(threads, "THREADS", n_threads)
    monkeypatch.setattr(threads, "PARALLEL_ROWS", 0)
    data = toy_data(max_docs=12)
    algo = FOLtRES(LinearRanker(5), cascade_model("perfect", 3), sigma=0.5)
    rng = np.random.default_rng(4)
    params, queries = rng.normal(size=5), rng.integers(0, data.n_queries, (9, 4))
    seeds = rng.integers(0, 2**63, 9).astype(np.uint64)
    shown = algo.shown_lists(params, data, queries, seeds)
    V, signs = perturbations(seeds, 5), algo.signs(4)
    for c in range(9):
        for b in range(4):
            lo, hi = data.query_ptr[queries[c, b]], data.query_ptr[queries[c, b] + 1]
            s = data.features[lo:hi].astype(np.float64) @ (params + signs[b] * 0.5 * V[c])
            top = sorted(range(hi - lo), key=lambda i: (-s[i], i))[:10]
            expected = [lo + i for i in top] + [-1] * (10 - len(top))
            assert shown[c, b].tolist() == expected


def _cohort_case(seed=21, F=46):
    """A cohort of 7 clients whose 4 queries are drawn from 3 queries (so several models share
    a query), one query of 700 rows."""
    rng = np.random.default_rng(seed)
    counts = np.array([3, 41, 700, 9])
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    X = rng.random((ptr[-1], F)).astype(np.float32)
    data = Dataset(features=X, labels=rng.integers(0, 3, ptr[-1]).astype(np.int8), query_ptr=ptr,
                   qids=np.arange(len(counts)), n_levels=3, name="toy")
    queries = rng.integers(0, 3, (7, 4))
    seeds = rng.integers(0, 2**63, 7).astype(np.uint64)
    return data, queries, seeds, rng.normal(size=F) * 0.1


def test_a_clients_scores_do_not_depend_on_its_cohort_or_the_threads(monkeypatch):
    """Reproducibility: client i's scores alone, inside the cohort (sharing its queries with
    other models), on 3 threads for the chunks and with 3 BLAS threads have the same bits.
    Catches: one GEMM over all the models of a query (BLAS rounds a model's scores by the
    number of models: the defect of the previous version), a thread-count dependent split."""
    from threadpoolctl import threadpool_limits

    from fltr_audit.engine import threads

    data, queries, seeds, params = _cohort_case()
    algo = FOLtRES(LinearRanker(data.n_features), cascade_model("perfect", 3), sigma=0.3)
    with threadpool_limits(1, "blas"):
        together = algo.scores(params, data, queries, seeds)
        alone = [algo.scores(params, data, queries[i:i + 1], seeds[i:i + 1])[0] for i in range(len(seeds))]
    with threadpool_limits(3, "blas"):
        monkeypatch.setattr(threads, "THREADS", 3)
        monkeypatch.setattr(threads, "PARALLEL_ROWS", 0)
        threaded = algo.scores(params, data, queries, seeds)
    assert np.array_equal(together, threaded)
    for i, own in enumerate(alone):
        assert np.array_equal(together[i, :, :own.shape[1]], own)
        assert np.isneginf(together[i, :, own.shape[1]:]).all()


def test_scores_are_float32_within_its_rounding_of_the_float64_oracle():
    """float32 features x float32(theta) summed in float32: every score within
    (F + 2) 2^-24 sum_f |x_f theta_f| of the float64 product (Higham Eq. 3.5 plus the rounding
    of theta); the MLP stays float64 (1e-12 relative). Catches: scores of the wrong model or
    query, padding inside a list, a float64 path left in (err would be 0)."""
    data, queries, seeds, params = _cohort_case(22)
    algo = FOLtRES(LinearRanker(data.n_features), cascade_model("perfect", 3), sigma=0.3)
    got = algo.scores(params, data, queries, seeds)
    V, signs = perturbations(seeds, data.n_features), algo.signs(4)
    worst = 0.0
    for c in range(len(seeds)):
        for b in range(4):
            R = data.features[data.query_rows(int(queries[c, b]))].astype(np.float64)
            theta = params + signs[b] * 0.3 * V[c]
            err = np.abs(got[c, b, :len(R)] - R @ theta)
            assert (err <= (data.n_features + 2) * 2.0**-24 * (np.abs(R) @ np.abs(theta))).all()
            assert np.isneginf(got[c, b, len(R):]).all()
            worst = max(worst, err.max())
    assert worst > 0
    mlp = FOLtRES(MLPRanker(data.n_features), cascade_model("perfect", 3), sigma=0.3)
    mparams = np.random.default_rng(5).normal(size=mlp.ranker.n_params) * 0.1
    got = mlp.scores(mparams, data, queries, seeds)
    V = perturbations(seeds, mlp.ranker.n_params)
    for c in (0, 6):
        for b in range(4):
            rows = data.query_rows(int(queries[c, b]))
            expect = mlp.ranker.score(mparams + signs[b] * 0.3 * V[c], data.features[rows])
            np.testing.assert_allclose(got[c, b, :len(expect)], expect, rtol=1e-12, atol=1e-12)
    alone = mlp.scores(mparams, data, queries[3:4], seeds[3:4])[0]
    assert np.array_equal(mlp.scores(mparams, data, queries, seeds)[3, :, :alone.shape[1]], alone)


def test_huge_models_are_scored_in_float64():
    """A model beyond float32's range (1e35) is scored and ranked in float64: the shown lists
    are the float64 oracle's. Catches: float32 overflow (inf scores, lists by position)."""
    data, queries, seeds, params = _cohort_case(23)
    algo = FOLtRES(LinearRanker(data.n_features), cascade_model("perfect", 3), sigma=0.3)
    huge = params * 1e36
    got = algo.scores(huge, data, queries, seeds)
    shown = algo.shown_lists(huge, data, queries, seeds)
    V, signs = perturbations(seeds, data.n_features), algo.signs(4)
    for c, b in ((0, 0), (4, 3)):
        rows = data.query_rows(int(queries[c, b]))
        s = data.features[rows].astype(np.float64) @ (huge + signs[b] * 0.3 * V[c])
        np.testing.assert_allclose(got[c, b, :len(s)], s, rtol=1e-12)
        assert shown[c, b].tolist() == (rows.start + np.argsort(-s, kind="stable")[:10]).tolist()


def test_training_gives_the_same_numbers_on_any_number_of_threads(monkeypatch):
    """Same seed, same model after 3 rounds whether the chunks run on 1 or 3 threads."""
    from fltr_audit.engine import threads
    from fltr_audit.engine.federation import train

    data = toy_data(n_queries=60, max_docs=40)
    results = []
    for n in (1, 3):
        monkeypatch.setattr(threads, "THREADS", n)
        monkeypatch.setattr(threads, "PARALLEL_ROWS", 0)
        algo = FOLtRES(LinearRanker(5), cascade_model("informational", 3), lr=0.05)
        settings = TrainSettings(clients=300, queries_per_client=4, rounds=3, seed=4, replace=True)
        results.append(train(algo, data, settings).params)
    assert np.array_equal(*results)


def test_float64_features_are_ranked_as_their_float32_copy():
    """Features stored in float64 (or not C-contiguous) are scored as the float32 features:
    the same scores and lists. Catches: a float64 variant of the kernel compiled for them
    (float64 sums: other bits, other ties)."""
    data, queries, seeds, params = _cohort_case(24)
    wide = Dataset(features=np.asfortranarray(data.features.astype(np.float64)), labels=data.labels,
                   query_ptr=data.query_ptr, qids=data.qids, n_levels=3, name="toy64")
    algo = FOLtRES(LinearRanker(data.n_features), cascade_model("perfect", 3), sigma=0.3)
    assert np.array_equal(algo.scores(params, wide, queries, seeds), algo.scores(params, data, queries, seeds))
    assert np.array_equal(algo.shown_lists(params, wide, queries, seeds), algo.shown_lists(params, data, queries, seeds))


def test_a_degenerate_model_with_nan_scores_is_ranked_as_plackett_luce_topk_ranks_them():
    """A model with +inf and -inf weights (NaN scores) does not crash a round: its lists are
    ``plackett_luce.topk`` of its scores (NaN first, as argmax), the other interactions keep
    theirs. Catches: NaN scores ranked by the kernel (comparisons all false: the first rows)."""
    from fltr_audit.engine import plackett_luce

    data, queries, seeds, params = _cohort_case(25)
    algo = FOLtRES(LinearRanker(data.n_features), cascade_model("perfect", 3), sigma=0.3)
    bad = params.copy()
    bad[0], bad[1] = np.inf, -np.inf
    shown = algo.shown_lists(bad, data, queries, seeds)
    scores = algo.scores(bad, data, queries, seeds)
    assert np.isnan(scores).any()
    valid = np.isfinite(scores) | np.isnan(scores)
    ptr = data.query_ptr[queries][..., None]
    expect = plackett_luce.topk(scores, valid, 10)
    assert np.array_equal(shown, np.where(expect >= 0, ptr + expect, -1))
