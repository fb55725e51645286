"""FedIPS (Li & Ouyang): click logs, IPS unbiasedness (Eq. 9), the hinge surrogate (Eq. 4),
the local SGD pass and server step (Algorithm 1), and the learning effect of IPS at gamma = 2."""

import numpy as np
import pytest

from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms.fedips import FedIPS, build_fedips, hinge_coefficients
from fltr_audit.engine.algorithms.fedips_users import UserPopulation, simulate_log
from fltr_audit.engine.algorithms.logging_policy import LoggingPolicy, train_logging_policy
from fltr_audit.engine.clicks import PositionBasedModel
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.data.load import load_splits
from fltr_audit.errors import FltrError
from fltr_audit.engine.federation import run_round, train
from fltr_audit.engine.rankers import LinearRanker
from fltr_audit.engine.training import TrainHooks, TrainSettings
from tests.cli_json import cli_result


def toy_data(n_queries=6, n_features=4, seed=0, sizes=None):
    """Small graded data set (5 levels) with one query shorter than K = 5."""
    rng = np.random.default_rng(seed)
    counts = np.array(sizes if sizes is not None else [7, 3] + [6] * (n_queries - 2))
    ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    return Dataset(
        features=rng.random((ptr[-1], n_features)).astype(np.float32),
        labels=rng.integers(0, 5, ptr[-1]).astype(np.int8),
        query_ptr=ptr,
        qids=np.arange(len(counts)),
        n_levels=5,
    )


def make_alg(data, **kw):
    policy = LoggingPolicy(np.linspace(1.0, -0.5, data.n_features), k=5)
    return FedIPS(LinearRanker(data.n_features), PositionBasedModel(gamma=kw.pop("gamma", 1.0)), policy, **kw)


def test_user_population_is_persistent_per_client_and_seed():
    model = PositionBasedModel(gamma=1.5)
    a, b = UserPopulation(model, seed=3, block=8), UserPopulation(model, seed=3, block=8)
    ids = np.array([0, 5, 9, 17, 5])
    assert np.array_equal(a.gammas(ids), b.gammas(ids[::-1])[::-1])  # order of requests is irrelevant
    assert a.gammas(ids)[1] == a.gammas(ids)[4]
    assert not np.allclose(a.gammas(ids), UserPopulation(model, seed=4, block=8).gammas(ids))
    assert (a.gammas(np.arange(64)) > 0).all()


@pytest.mark.parametrize("cap,scale", [(10, 0.6), (60, 0.1)])
def test_simulate_log_matches_a_sequential_loop(cap, scale):
    """Sessions cycle over the B lists until m clicks; compare with a plain per-client loop
    driven by the same uniforms. With 60 sessions and rare clicks some clients need more than
    the first 4m sessions (the early look of ``simulate_log``; catches their logs cut there)."""
    n, B, K, m = 7, 3, 4, 5
    rng = np.random.default_rng(1)
    prob = rng.random((n, B, K)) * scale
    prob[0] = 0.0  # a client that never clicks
    prob[1, :, 1:] = 0.0
    slot, pos, n_clicks, sessions, session_clicks = simulate_log(prob, m, cap, np.random.default_rng(5))
    rounds = -(-cap // B)
    u = np.random.default_rng(5).random((n, rounds, B, K))
    for c in range(n):
        clicks, sess, sc = [], np.zeros(B, int), np.zeros((B, K), int)
        for s in range(rounds * B):
            if len(clicks) >= m:
                break
            b = s % B
            sess[b] += 1
            for i in range(K):
                if u[c, s // B, b, i] < prob[c, b, i]:
                    sc[b, i] += 1
                    if len(clicks) < m:
                        clicks.append((b, i))
        assert n_clicks[c] == len(clicks)
        assert [(int(x), int(y)) for x, y in zip(slot[c], pos[c]) if x >= 0] == clicks
        assert (slot[c, len(clicks):] == -1).all()
        assert np.array_equal(sessions[c], sess) and np.array_equal(session_clicks[c], sc)
    if cap == 60:
        assert ((n_clicks == m) & (slot[:, -1] >= 0)).any() and (sessions.sum(1) > 4 * m).any()


def test_ips_click_metric_is_unbiased_eq9():
    """Eq. 9: E[sum_d g(d) c_d / p_d] = sum_d g(d) r_d for a fixed ranking (here g = the rank
    of each shown document under another ranker, and r_d = P(click | examined), 1 or 0.1 by
    Eq. 11); the unweighted click metric is biased when gamma > 0. 40,000 clients x 2 lists
    (one session each): the tolerance is 4 standard errors of the mean."""
    data = toy_data(n_queries=2, sizes=[8, 6])
    alg = make_alg(data, gamma=1.0, clicks_per_client=10, max_sessions=2, user_seed=2)  # m = all 10 slots
    n = 40_000
    queries = np.tile([0, 1], (n, 1))
    log = alg.simulate(data, queries, np.arange(n), np.random.default_rng(7))
    assert (log.sessions == 1).all()  # one session per list: no stopping rule involved
    prop = alg.propensities(data, log)  # (n, K): the true examination curves
    shown = log.shown[0]  # the same f_0 lists for every client
    labels = data.labels[shown]
    r = np.where(labels >= 3, 1.0, 0.1)
    g = np.argsort(np.argsort(-data.features[shown] @ np.arange(4.0), axis=1), axis=1) + 1.0  # another ranking
    truth = (g * r).sum()  # Eq. 8 summed over both lists
    ips = (log.session_clicks * g / prop[:, None, :]).sum(axis=(1, 2))
    naive = (log.session_clicks * g).sum(axis=(1, 2))
    se_ips = ips.std(ddof=1) / np.sqrt(n)
    se_naive = naive.std(ddof=1) / np.sqrt(n)
    assert abs(ips.mean() - truth) < 4 * se_ips
    assert abs(naive.mean() - truth) > 20 * se_naive


def test_hinge_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    n, K, F = 6, 5, 7
    x = rng.random((n, K, F))
    valid = np.ones((n, K), bool)
    valid[0, 3:] = False
    pos = rng.integers(0, 3, n)
    w = rng.normal(scale=0.5, size=(n, F))
    ranker = LinearRanker(F)

    def h(wv):
        return hinge_coefficients(ranker.score(wv, x), valid, pos)[0]

    _, coef = hinge_coefficients(ranker.score(w, x), valid, pos)
    grad = ranker.vjp(w, x, coef)
    eps = 1e-6
    num = np.empty_like(w)
    for f in range(F):
        d = np.zeros_like(w)
        d[:, f] = eps
        num[:, f] = (h(w + d) - h(w - d)) / (2 * eps)
    np.testing.assert_allclose(grad, num, atol=1e-6)
    # and the value is Eq. 4 written out pair by pair
    s = ranker.score(w, x)
    brute = [sum(max(0.0, 1 - (s[c, pos[c]] - s[c, j])) for j in range(K) if valid[c, j]) for c in range(n)]
    np.testing.assert_allclose(h(w), brute)


@pytest.mark.parametrize("propensity", ["true", "none"])
def test_local_update_is_the_ips_weighted_sgd_pass(propensity):
    """The vectorized client step equals Algorithm 1 lines 5-9 run client by client in a loop."""
    data = toy_data(n_queries=6, n_features=4)
    alg = make_alg(data, gamma=1.0, lr_local=0.3, clicks_per_client=4, propensity=propensity, user_seed=1)
    rng = np.random.default_rng(0)
    params = rng.normal(size=4)
    queries = rng.integers(0, 6, (5, 2))
    ids = np.arange(10, 15)
    out = alg.client_step(params, data, queries, ids, np.random.default_rng(9), np.random.default_rng(0))
    log = alg.simulate(data, queries, ids, np.random.default_rng(9))
    gammas = alg.users.gammas(ids)
    for c in range(5):
        w = params.copy()
        for b, i in zip(log.click_slot[c], log.click_pos[c]):
            if b < 0:
                break
            rows = [r for r in log.shown[c, b] if r >= 0]
            x = data.features[rows].astype(np.float64)
            s = x @ w
            grad = sum((x[j] - x[i]) for j in range(len(rows)) if 1 - (s[i] - s[j]) > 0)
            p = (1.0 / (i + 1)) ** gammas[c] if propensity == "true" else 1.0
            w = w - 0.3 / p * grad
        np.testing.assert_allclose(out.messages.vector[c], w - params, rtol=1e-5, atol=1e-5)
    assert out.messages.vector_kind == "update"
    assert np.array_equal(out.clicks, log.clicked)
    assert (out.messages.n_interactions == 2).all()


def test_a_nonlinear_rankers_pass_is_its_click_steps_client_by_client(monkeypatch):
    """A ranker other than the linear one (an MLP: ``score`` and ``vjp``, no kernel) takes the
    numpy pass, in parts of 2 clients on 3 threads: each client's update equals its click steps
    run alone (Eq. 4 and 7 with the hinge's gradient through ``vjp``). Catches: a step with
    another step's size, a part reading another part's log, the update not relative to params."""
    from fltr_audit.engine import threads
    from fltr_audit.engine.algorithms import fedips
    from fltr_audit.engine.rankers import MLPRanker

    monkeypatch.setattr(fedips, "PASS_CLIENTS", 2)
    monkeypatch.setattr(threads, "THREADS", 3)
    monkeypatch.setattr(threads, "PARALLEL_ROWS", 0)
    data = toy_data(n_queries=6, n_features=4)
    ranker = MLPRanker(4, hidden=3)
    alg = FedIPS(ranker, PositionBasedModel(gamma=1.0), LoggingPolicy(np.linspace(1.0, -0.5, 4), k=5),
                 lr_local=0.3, clicks_per_client=4, max_sessions=2, propensity="none", user_seed=1)
    rng = np.random.default_rng(5)
    params, queries = ranker.init_params(rng), rng.integers(0, 6, (7, 2))
    out = alg.client_step(params, data, queries, np.arange(7), np.random.default_rng(9), np.random.default_rng(0))
    log = alg.simulate(data, queries, np.arange(7), np.random.default_rng(9))
    assert (log.n_clicks < 4).any() and (log.n_clicks > 0).any()
    table = alg.policy.table_features(data)
    for c in range(7):
        w = params.copy()
        for b, i in zip(log.click_slot[c], log.click_pos[c]):
            if b < 0:
                break
            x, valid = table[queries[c, b]][None], (log.shown[c, b] >= 0)[None]
            _, coef = hinge_coefficients(ranker.score(w[None], x), valid, np.array([i]))
            w = w - 0.3 * ranker.vjp(w[None], x, coef)[0]
        np.testing.assert_allclose(out.messages.vector[c], w - params, rtol=1e-12, atol=1e-12)


def test_server_update_is_global_plus_eta_times_mean_of_intercepted_updates():
    data = toy_data(n_queries=12, n_features=4, sizes=[6] * 12)
    alg = make_alg(data, lr_local=0.1, lr_global=0.7)
    seen = []
    res = train(alg, data, TrainSettings(clients=4, queries_per_client=2, rounds=3, seed=5),
                hooks=TrainHooks(interceptors=[seen.append]))
    for before, after in zip(seen, seen[1:]):
        expected = before.view.global_params + 0.7 * before.view.messages.vector.mean(axis=0)
        np.testing.assert_allclose(after.view.global_params, expected, rtol=1e-12)
    last = seen[-1].view
    np.testing.assert_allclose(res.params, last.global_params + 0.7 * last.messages.vector.mean(axis=0))
    # one round through run_round gives the same rule
    q = np.arange(8).reshape(4, 2)
    new, _, batch, _ = run_round(alg, res.params, None, data, q, np.arange(4), 1, 0)
    np.testing.assert_allclose(new, res.params + 0.7 * batch.view.messages.vector.mean(axis=0))


def test_bad_parameters_are_one_line_errors():
    data = toy_data()
    for kw in ({"propensity": "bogus"}, {"lr_local": 0.0}, {"clicks_per_client": 0}, {"propensity": "estimated"}):
        with pytest.raises(FltrError):
            make_alg(data, **kw)
    with pytest.raises(FltrError, match="^propensity: "):
        build_fedips(data, propensity="nope")


def test_fedips_beats_fedavg_under_strong_position_bias():
    """Synthetic yahoo, gamma = 2, 3 seeds each: FedIPS ends above FedAvg by more than either
    method's run-to-run spread.

    Setting: 500 queries (300 for training), 100 clients x 5 queries, m = 10, K = 5, 30
    rounds, eta_l = 0.001 (the best of the paper's grid here for both methods). Position
    bias only hurts a learner when the logging policy is clearly worse than the best linear
    ranker (the paper's f_0 is far below lambda-Linear). The synthetic profile's relevance
    is driven by 8 latent factors, so 1 % of its training queries (3) already gives a
    near-optimal f_0; we train f_0 on one query instead (fraction 0.001), which leaves it
    clearly suboptimal (checked below). FedAvg then drifts towards f_0's preferences -- it
    learns mostly from rank-1 clicks, noise clicks included -- while FedIPS reweights them.
    """
    splits = load_splits("synthetic:yahoo", 1, normalization="query-minmax", drop_single_label=True, queries=500)
    tr, te = splits.train, splits.test
    policy = train_logging_policy(tr, k=5, fraction=0.001, seed=1)

    def ndcg5(p):
        return metrics.mean_ndcg(LinearRanker(tr.n_features).score(p, te.features), te, 5)

    finals = {}
    for propensity in ("true", "none"):
        finals[propensity] = []
        for seed in range(3):
            alg = FedIPS(LinearRanker(tr.n_features), PositionBasedModel(gamma=2.0), policy, lr_local=0.001,
                         propensity=propensity, user_seed=seed)
            res = train(alg, tr, TrainSettings(clients=100, queries_per_client=5, rounds=30, seed=seed, replace=True))
            finals[propensity].append(ndcg5(res.params))
    ips, avg = np.array(finals["true"]), np.array(finals["none"])
    spread = max(np.ptp(ips), np.ptp(avg))
    assert ndcg5(policy.params) < ips.min() - 0.03  # f_0 is clearly suboptimal
    assert ips.min() - avg.max() > spread, (ips, avg)


def test_cli_writes_run_and_rejects_bad_input(tmp_path, capsys):
    from fltr_audit.cli import main

    out = tmp_path / "run"
    args = ["train", "fedips", "--data", "synthetic:yahoo", "--queries", "100", "--clients", "20", "--rounds", "2",
            "--gamma", "2", "--out", str(out), "--quiet", "--json"]
    assert main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "curves.csv", "model.npy"]

    result = cli_result(capsys.readouterr().out)
    assert result["algorithm"] == "fedips" and 0 <= result["final_ndcg5"] <= 1
    assert main(args[:-4] + ["--out", str(tmp_path / "bad"), "--propensity", "bogus", "--quiet"]) == 2
    assert "--propensity" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_client_step_in_parts_on_threads_equals_one_pass(monkeypatch):
    """The cohort's SGD passes cut into parts on 3 threads give the one-part result bit for bit
    (catches a part reading or writing another part's rows)."""
    from fltr_audit.engine import threads
    from fltr_audit.engine.algorithms import fedips

    data = toy_data(n_queries=6, n_features=4)
    alg = make_alg(data, gamma=1.0, lr_local=0.3, clicks_per_client=4, user_seed=1)
    rng = np.random.default_rng(3)
    params, queries = rng.normal(size=4), rng.integers(0, 6, (7, 2))
    outs = []
    for part, n_threads in ((1000, 1), (2, 3)):
        monkeypatch.setattr(fedips, "PASS_CLIENTS", part)
        monkeypatch.setattr(threads, "THREADS", n_threads)
        monkeypatch.setattr(threads, "PARALLEL_ROWS", 0)
        outs.append(alg.client_step(params, data, queries, np.arange(7), np.random.default_rng(9),
                                    np.random.default_rng(0)).messages.vector)
    assert np.abs(outs[0]).sum() > 0
    assert np.array_equal(outs[0], outs[1])
