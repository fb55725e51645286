"""bayes: equals a brute-force Bayes posterior computed by plain loops on small lists, recovers
every click OLSR recovers without noise, is never below OLSR's AUC under Laplace noise."""

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit

from attacks.bayes import Bayes
from attacks.bayes_noise import ClipStep, NoiseModel
from attacks.bayes_posterior import LOG_ODDS_BOUND
from attacks.bayes_prior import cascade_log_prior, click_vectors
from attacks.olsr import OLSR
from attacks.registry import make_attack
from attacks.scoring import score_guess
from fltr_audit.engine.algorithms.fpdgd import FPDGD, cohort_rankings, pair_weights
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.probe import probe
from fltr_audit.engine.rankers import make_ranker


def _data(n_queries, docs, F, rng):
    counts = rng.integers(docs[0], docs[1] + 1, n_queries)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return Dataset(features=rng.normal(size=(ptr[-1], F)).astype(np.float32),
                   labels=rng.integers(0, 3, ptr[-1]).astype(np.int8), query_ptr=ptr,
                   qids=np.arange(n_queries), n_levels=3, name="bayes-test")


def _round(ranker_name="linear", click="navigational", k=5, n=12, F=6, defenses=(), B=1, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    data = _data(n * B, (k + 1, k + 4), F, rng)
    ranker = make_ranker(ranker_name, F)
    algo = FPDGD(ranker, cascade_model(click, 3), lr=0.1, k=k)
    g = scale * rng.normal(size=ranker.n_params)
    batches = probe(algo, g, data, seed=seed, queries_per_client=B, cohort_size=n, client_defenses=defenses)
    return algo, batches[0]


def _ccm_prob(model, labels, c):
    """P(click vector c) under the CCM by enumerating every stop decision (plain recursion)."""
    def walk(i, alive):
        if i == len(c):
            return 1.0
        if labels[i] < 0:
            return walk(i + 1, alive) if not c[i] else 0.0
        p_click = model.click_prob[labels[i]] if alive else 0.0
        if c[i]:
            s = model.stop_prob[labels[i]]
            return p_click * (s * walk(i + 1, False) + (1 - s) * walk(i + 1, True))
        return (1 - p_click) * walk(i + 1, alive)
    return walk(0, True)


def _brute_force(algo, view, loglik_of, prior="click-model"):
    """Posterior marginals by a loop over messages and click vectors, replaying each with the
    engine's own PDGD pieces (cohort_rankings, pair_weights, ranker.vjp)."""
    g = view.global_params
    shown, queries = view.interactions.shown[:, 0], view.interactions.queries[:, 0]
    n, k = shown.shape
    vectors = view.messages.updates(g)
    out = np.zeros((n, k))
    for i in range(n):
        _, s_scores, log_dens = cohort_rankings(algo.ranker, g[None, :], view.documents, queries[i:i + 1],
                                                np.random.default_rng(0), k, deterministic=True)
        ok = shown[i] >= 0
        labels = np.where(ok, view.documents.labels[np.maximum(shown[i], 0)], -1)
        X = view.documents.features[np.maximum(shown[i], 0)]
        post = []
        cands = []
        for bits in itertools.product([False, True], repeat=k):
            c = np.array(bits)
            if (c & ~ok).any():
                continue
            p = _ccm_prob(algo.click_model, labels, c) if prior == "click-model" else 1.0
            if p == 0:
                continue
            coef = pair_weights(s_scores, log_dens, c[None, :], ok[None, :])[0]
            u = algo.lr * algo.ranker.vjp(g, X, coef)
            post.append(np.log(p) + loglik_of(u, vectors[i], g))
            cands.append(c)
        post = np.array(post)
        w = np.exp(post - post.max())
        out[i] = (w[:, None] * np.array(cands)).sum(0) / w.sum()
    return out


def test_cascade_prior_matches_recursion_and_sums_to_one():
    model = cascade_model("informational", 3)
    rng = np.random.default_rng(3)
    labels = rng.integers(-1, 3, (4, 5))
    labels[:, :2] = np.maximum(labels[:, :2], 0)
    V = click_vectors(5)
    fast = np.exp(cascade_log_prior(model.click_prob, model.stop_prob, labels, V))
    slow = np.array([[_ccm_prob(model, lab, c) for c in V] for lab in labels])
    np.testing.assert_allclose(fast, slow, atol=1e-15)
    np.testing.assert_allclose(fast.sum(1), 1.0)


@pytest.mark.parametrize("ranker", ["linear", "mlp"])
def test_bayes_equals_brute_force_under_laplace_noise(ranker):
    from defenses.dp_local import LocalLaplace

    defense = LocalLaplace(eps=4.5, sensitivity=5.0, norm="l2")
    algo, batch = _round(ranker, defenses=(defense,))
    noise = NoiseModel("laplace", defense.scale, (ClipStep(2.5, "update", "l2"),))

    def loglik(u, v, g):
        norm = np.linalg.norm(u)
        u = u * min(1.0, 2.5 / norm) if norm > 0 else u
        return stats.laplace.logpdf(v - u, scale=defense.scale).sum()

    guess = Bayes(algo, noise).guess(batch.view)
    np.testing.assert_allclose(expit(guess.score)[:, 0], _brute_force(algo, batch.view, loglik), atol=1e-9)


def test_bayes_equals_brute_force_under_gaussian_noise_uniform_prior():
    from defenses.dp_gaussian import Gaussian

    defense = Gaussian(sigma=0.05, clip=1.0)
    algo, batch = _round(defenses=(defense,), click="informational")
    noise = NoiseModel("gaussian", defense.std, (ClipStep(1.0, "update", "l2"),))

    def loglik(u, v, g):
        norm = np.linalg.norm(u)
        u = u * min(1.0, 1.0 / norm) if norm > 0 else u
        return stats.norm.logpdf(v - u, scale=defense.std).sum()

    guess = make_attack("bayes-uniform", algorithm=algo, noise=noise).guess(batch.view)
    assert guess.attack == "bayes-uniform"
    np.testing.assert_allclose(expit(guess.score)[:, 0], _brute_force(algo, batch.view, loglik, "uniform"), atol=1e-9)


def test_bayes_without_noise_recovers_every_click_olsr_recovers():
    for seed in range(3):
        algo, batch = _round(k=10, n=40, F=46, seed=seed, click="informational")
        bayes = Bayes(algo).guess(batch.view)
        olsr = OLSR().guess(batch.view)
        clicks = batch.truth.clicks
        mask = batch.view.interactions.mask
        olsr_exact = ((olsr.decision == clicks) | ~mask).all(axis=(1, 2))
        bayes_exact = ((bayes.decision == clicks) | ~mask).all(axis=(1, 2))
        assert olsr_exact.sum() > 0
        assert bayes_exact[olsr_exact].all()


@pytest.mark.parametrize("seed,eps", [(0, 4.5), (1, 10.0), (2, 45.0)])
def test_bayes_auc_never_below_olsr_under_laplace_noise(seed, eps):
    from defenses.dp_local import LocalLaplace

    defense = LocalLaplace(eps=eps, sensitivity=5.0)
    algo, batch = _round(k=10, n=150, F=46, seed=seed, defenses=(defense,), scale=0.3)
    noise = NoiseModel("laplace", defense.scale, (ClipStep(2.5, "update", "l1"),))
    auc = {}
    for attack in (Bayes(algo, noise), OLSR(loss="l1"), OLSR()):
        rows = score_guess(attack.guess(batch.view), batch, min_shown=10, require_click=True)
        auc[attack.name + str(getattr(attack, "loss", ""))] = rows["auc"].mean()
    assert auc["bayes"] >= max(auc["olsr-l1l1"], auc["olsrl2"]), auc


def test_bayes_several_lists_is_approximate_and_exact_without_noise_on_easy_rounds():
    algo, batch = _round(k=5, n=20, F=46, B=3, seed=4, click="navigational")
    guess = Bayes(algo).guess(batch.view)
    assert guess.attack == "bayes-approx"
    mask = batch.view.interactions.mask
    agree = ((guess.decision == batch.truth.clicks) | ~mask).all(axis=(1, 2))
    assert agree.mean() > 0.9


def test_bayes_refuses_secure_aggregation_of_many_and_fedips():
    from defenses.secagg import IdealSecAgg

    rng = np.random.default_rng(0)
    data = _data(6, (6, 8), 5, rng)
    algo = FPDGD(make_ranker("linear", 5), cascade_model("perfect", 3), k=5)
    batch = probe(algo, rng.normal(size=5), data, seed=0, cohort_size=6, aggregator=IdealSecAgg())[0]
    with pytest.raises(FltrError, match="^attacks: bayes"):
        Bayes(algo).guess(batch.view)

    class FedIPSLike:
        name = "fedips"
        click_model = None
    with pytest.raises(FltrError, match="^attacks: bayes.*supported"):
        Bayes(FedIPSLike()).guess(_round()[1].view)


def test_noise_model_of_defense_stacks():
    from defenses.stack import parse_defense
    from fltr_audit.runs.noise_model import noise_model

    nm = noise_model(parse_defense("clip(sensitivity=5)+dp-distributed(eps=4.5)"))
    assert nm.kind == "gamma-difference" and nm.scale == pytest.approx(5 / 4.5)
    assert nm.clips == (ClipStep(2.5, "weights", "l2"), ClipStep(2.5, "weights", "l2"))
    nm = noise_model(parse_defense("dp-gaussian(sigma=1,clip=1)"))
    assert (nm.kind, nm.scale, nm.clips) == ("gaussian", 1.0, (ClipStep(1.0, "update", "l2"),))
    nm = noise_model(parse_defense("dp-local-laplace(eps=4.5)+secagg"))
    assert (nm.kind, nm.clips[0].norm) == ("laplace", "l1")
    assert noise_model(parse_defense("none")).kind == "none"
    assert noise_model(parse_defense("rr(p=0.9)")).values[-1] == 1.0
    with pytest.raises(FltrError, match="^attacks: bayes"):
        noise_model(parse_defense("dp-local-laplace+dp-gaussian"))


def test_bayes_equals_brute_force_under_dp_distributed_share_and_weight_clip():
    from defenses.dp_distributed import DistributedLaplace
    from defenses.stack import parse_defense
    from fltr_audit.runs.noise_model import noise_model

    stack = parse_defense("clip(sensitivity=1)+dp-distributed(eps=4.5)")
    algo, batch = _round(defenses=stack.client, scale=0.5)
    noise = noise_model(stack)
    a, lam = 1.0 / len(batch.view.participants), stack.client[1].scale

    def loglik(u, v, g):
        w = g + u
        for _ in range(2):
            w = w * min(1.0, 0.5 / np.linalg.norm(w))
        r = v - (w - g)
        x = np.maximum(np.abs(r), 1e-12 * np.abs(v + g).max())
        return ((2 * a - 1) * np.log(x) - x / lam).sum()

    guess = Bayes(algo, noise).guess(batch.view)
    np.testing.assert_allclose(expit(guess.score)[:, 0], _brute_force(algo, batch.view, loglik), atol=1e-9)
    assert isinstance(stack.client[1], DistributedLaplace)


def test_gamma_difference_approximation_tracks_the_exact_density():
    """The approximate log-density differs from the exact Bessel-K density by less than
    a |log|x|| + O(1) over the range that matters (a = 1/n)."""
    from scipy.special import gammaln, kve

    a, lam = 0.01, 1.0
    x = np.logspace(-12, 1, 200)
    v = a - 0.5
    exact = (a - 0.5) * np.log(x) + np.log(kve(v, x / lam)) - x / lam - (
        0.5 * np.log(np.pi) + gammaln(a) + (a - 0.5) * np.log(2) + (a + 0.5) * np.log(lam))
    approx = (2 * a - 1) * np.log(x) - x / lam
    diff = exact - approx
    assert np.ptp(diff) < a * np.abs(np.log(x)).max() + 1.0


def test_bayes_foltr_metric_equals_brute_force_under_rr():
    from defenses.randomized_response import RandomizedResponse
    from fltr_audit.engine.algorithms.foltr_es import FOLtRES
    from fltr_audit.engine import metrics

    rng = np.random.default_rng(5)
    data = _data(30, (6, 9), 5, rng)
    model = cascade_model("navigational", 3)
    algo = FOLtRES(make_ranker("linear", 5), model, k=5, antithetic=False)
    rr = RandomizedResponse(p=0.7, values=tuple(metrics.max_rr(np.eye(6, 5, dtype=bool)).tolist()))
    batch = probe(algo, rng.normal(size=5), data, seed=1, cohort_size=30, client_defenses=(rr,))[0]
    noise = NoiseModel("rr", 0.7, values=tuple(rr.values))
    guess = Bayes(algo, noise).guess(batch.view)
    view = batch.view
    for i in range(5):
        shown = view.interactions.shown[i, 0]
        labels = np.where(shown >= 0, data.labels[np.maximum(shown, 0)], -1)
        post, cands = [], []
        for bits in itertools.product([False, True], repeat=5):
            c = np.array(bits)
            p = _ccm_prob(model, labels, c)
            if p == 0:
                continue
            true = metrics.max_rr(c[None, :])[0]
            lik = 0.7 if np.isclose(true, view.messages.metric[i, 0]) else 0.3 / (len(rr.values) - 1)
            post.append(p * lik)
            cands.append(c)
        post = np.array(post)
        expected = (post[:, None] * np.array(cands)).sum(0) / post.sum()
        np.testing.assert_allclose(expit(guess.score)[i, 0][shown >= 0], expected[shown >= 0], atol=1e-12)


def test_bayes_scores_are_finite_when_an_update_is_zero():
    algo, batch = _round(click="perfect", n=30, seed=7)
    view = batch.view
    zero = view.messages.replace(vector=np.broadcast_to(view.global_params, view.messages.vector.shape).copy())
    guess = Bayes(algo).guess(__import__("dataclasses").replace(view, messages=zero))
    assert np.isfinite(guess.score[view.interactions.mask]).all()


def _replay_loop(algo, view, i, config):
    """The raw update of message i for click vectors ``config`` (B, k): the client's B PDGD steps
    by a plain loop (log-denominators summed over the query's unplaced candidates one by one)."""
    g = np.asarray(view.global_params, dtype=np.float64)
    docs, inter = view.documents, view.interactions
    w = g.copy()
    for b in range(config.shape[0]):
        q, shown = inter.queries[i, b], inter.shown[i, b]
        ok = shown >= 0
        rows = np.arange(docs.query_ptr[q], docs.query_ptr[q + 1])
        # the client's scores: its ranker's block scoring (float32 for the linear ranker; tested
        # against float64 in test_rankers), so a noise-free replay reproduces the message
        scores = algo.ranker.score_blocks(w[None], docs.features, rows[:1], [len(rows)])
        placed = []
        log_dens = []
        for pos in range(len(shown) + 1):
            rest = [s for r, s in zip(rows, scores) if r not in placed]
            log_dens.append(np.logaddexp.reduce(rest) if rest else -np.inf)
            if pos < len(shown) and ok[pos]:
                placed.append(shown[pos])
        s_scores = np.array([scores[r - rows[0]] if o else -np.inf for r, o in zip(shown, ok)])
        coef = pair_weights(s_scores[None], np.array(log_dens)[None], config[b][None], ok[None])[0]
        X = docs.features[np.maximum(shown, 0)]
        X[~ok] = 0.0
        w = w + algo.lr * algo.ranker.vjp(w, X, coef)
    return w - g


def _joint_brute_force(algo, view, loglik_of):
    """Log posteriors (n, 2^(Bk)) and click configurations (2^(Bk), B, k) of every joint click
    configuration of every message, by loops (click-model prior per list by recursion)."""
    n, B, k = view.interactions.shown.shape
    observed = view.messages.updates(view.global_params)
    configs = np.array(list(itertools.product([False, True], repeat=B * k))).reshape(-1, B, k)
    post = np.full((n, len(configs)), -np.inf)
    for i in range(n):
        shown = view.interactions.shown[i]
        labels = np.where(shown >= 0, view.documents.labels[np.maximum(shown, 0)], -1)
        for e, c in enumerate(configs):
            p = np.prod([_ccm_prob(algo.click_model, labels[b], c[b]) for b in range(B)])
            if p > 0:
                post[i, e] = np.log(p) + loglik_of(_replay_loop(algo, view, i, c), observed[i])
    return post, configs


def _exact_loglik(u, v):
    return -((v - u) ** 2).sum() / (2 * (1e-10 * np.linalg.norm(v)) ** 2)


@pytest.mark.parametrize("ranker", ["linear", "mlp"])
def test_bayes_two_lists_enumerated_equals_joint_brute_force_under_laplace_noise(ranker):
    """B = 2, k = 4: 2^8 joint configurations <= MAX_JOINT, enumerated exactly (named bayes)."""
    from defenses.dp_local import LocalLaplace

    defense = LocalLaplace(eps=4.5, sensitivity=5.0, norm="l2")
    algo, batch = _round(ranker, k=4, n=5, B=2, defenses=(defense,), seed=3)
    noise = NoiseModel("laplace", defense.scale, (ClipStep(2.5, "update", "l2"),))

    def loglik(u, v):
        norm = np.linalg.norm(u)
        u = u * min(1.0, 2.5 / norm) if norm > 0 else u
        return stats.laplace.logpdf(v - u, scale=defense.scale).sum()

    guess = Bayes(algo, noise).guess(batch.view)
    assert guess.attack == "bayes"
    post, configs = _joint_brute_force(algo, batch.view, loglik)
    weight = np.exp(post - post.max(1, keepdims=True))
    expected = np.einsum("ne,ebk->nbk", weight, configs) / weight.sum(1)[:, None, None]
    mask = batch.view.interactions.mask
    np.testing.assert_allclose(expit(guess.score)[mask], expected[mask], atol=1e-9)


@pytest.mark.parametrize("max_joint", [30, 20])
def test_bayes_approx_map_equals_joint_brute_force_map_without_noise(monkeypatch, max_joint):
    """Forced onto the approximate path (30: joint prefix search of 5^2; 20: the beam), B = 2,
    k = 4: its decisions are the brute-force MAP over all 2^8 joint configurations."""
    import attacks.bayes as bayes

    monkeypatch.setattr(bayes, "MAX_JOINT", max_joint)
    algo, batch = _round(k=4, n=8, B=2, F=46, seed=5, click="informational")
    guess = Bayes(algo).guess(batch.view)
    assert guess.attack == "bayes-approx"
    post, configs = _joint_brute_force(algo, batch.view, lambda u, v: _exact_loglik(u, v))
    mask = batch.view.interactions.mask
    map_config = configs[np.argmax(post, axis=1)] & mask
    np.testing.assert_array_equal(guess.decision, map_config)
    np.testing.assert_array_equal(map_config, batch.truth.clicks & mask)


def _perfect_olsr_lists(olsr_score, clicks, mask):
    """Per list: every clicked shown slot has a higher OLSR score than every unclicked shown one."""
    s = np.where(mask, olsr_score, np.nan)
    lowest_click = np.nanmin(np.where(clicks & mask, s, np.inf), axis=-1)
    highest_other = np.nanmax(np.where(~clicks & mask, s, -np.inf), axis=-1)
    return lowest_click > highest_other


@pytest.mark.parametrize("B,k,seed,n", [(3, 10, 0, 24), (4, 6, 1, 24), (4, 10, 2, 12), (5, 10, 3, 10)])
def test_bayes_approx_without_noise_recovers_clicks_where_olsr_ranks_each_list_perfectly(B, k, seed, n):
    """B = 5, k = 10: 11^5 prefix combinations exceed MAX_JOINT, so the beam is what is tested
    (a round where a beam ranked by OLSR-completed configurations lost a perfectly ranked message)."""
    from sklearn.metrics import roc_auc_score

    algo, batch = _round(k=k, n=n, B=B, F=46, seed=seed, click="informational", scale=0.3)
    view = batch.view
    bayes, olsr = Bayes(algo).guess(view), OLSR().guess(view)
    assert bayes.attack == "bayes-approx"
    clicks, mask = batch.truth.clicks, view.interactions.mask
    perfect = _perfect_olsr_lists(olsr.score, clicks, mask).all(axis=1)
    assert perfect.sum() >= 3
    exact = ((bayes.decision == clicks) | ~mask).all(axis=(1, 2))
    assert exact[perfect].all()
    auc = {"bayes": [], "olsr": []}
    for i, b in zip(*np.nonzero(((clicks & mask).any(-1)) & ((~clicks & mask).any(-1)))):
        m = mask[i, b]
        for name, guess in (("bayes", bayes), ("olsr", olsr)):
            auc[name].append(roc_auc_score(clicks[i, b][m], guess.score[i, b][m]))
    assert np.mean(auc["bayes"]) >= np.mean(auc["olsr"]), (np.mean(auc["bayes"]), np.mean(auc["olsr"]))


def _isolated_errors(aggregator, members, trials, P, seed, norm=0.0):
    """What the attacked update carries besides the target's clipped update, over ``trials``
    rounds of ``members`` clients: target first with a random update of L2 norm ``norm`` (0: zero),
    the others zero; the update read as ``client_updates`` reads an isolated target,
    ``members * (aggregate - g)``."""
    from defenses.dp_fedavg import clip_updates
    from fltr_audit.engine.messages import Messages

    rng = np.random.default_rng(seed)
    g = rng.normal(size=P)
    errors = []
    for _ in range(trials):
        u = np.zeros((members, P))
        if norm:
            d = rng.normal(size=P)
            u[0] = norm * d / np.linalg.norm(d)
        msgs = Messages(n_interactions=np.ones(members, dtype=np.int64), vector=g + u)
        agg = aggregator.aggregate(msgs, np.arange(members), rng, global_params=g)
        errors.append(members * (agg.mean - g) - clip_updates(u[:1], aggregator.clip)[0])
    return np.concatenate(errors)


@pytest.mark.parametrize("text,members", [("dp-fedavg(noise_multiplier=0.7,clip=1.3)", 1),
                                          ("dp-fedavg(noise_multiplier=2,clip=0.5)", 20),
                                          ("ddgauss(noise_multiplier=1,clip=1)", 1),
                                          ("ddgauss(noise_multiplier=1,clip=1)", 100)])
def test_aggregator_noise_std_equals_the_defenses_noise_on_zero_updates(text, members):
    from defenses.stack import parse_defense
    from fltr_audit.runs.noise_model import noise_model

    stack = parse_defense(text)
    nm = noise_model(stack, members=members)
    assert nm.kind == "gaussian" and nm.clips == (ClipStep(stack.aggregator.clip, "update", "l2"),)
    P = 64 if "ddgauss" in text else 400
    errors = _isolated_errors(stack.aggregator, members, 20_000 // P, P, seed=11)
    # 20,000 samples: the sample std's relative standard error is about 0.5 %
    assert errors.std() == pytest.approx(nm.scale, rel=0.03)
    assert abs(errors.mean()) < 4 * nm.scale / np.sqrt(errors.size)


def test_ddgauss_noise_std_includes_rounding_and_the_discrete_variance():
    """A coarse ring (7 bits, one client): rounding is about a fifth of the error's variance, and
    the discrete Gaussian's variance is summed over the integers (checked against the sampler)."""
    from defenses.ddgauss import DDGauss, discrete_gaussian
    from defenses.ddgauss import decoded_noise_std, discrete_gaussian_variance

    rng = np.random.default_rng(2)
    samples = discrete_gaussian(0.3, (200_000,), rng)
    assert samples.var() == pytest.approx(discrete_gaussian_variance(0.3), rel=0.02)
    assert abs(discrete_gaussian_variance(0.3) - 0.3) > 0.05 * 0.3                 # not sigma^2 at this width
    defense = DDGauss(noise_multiplier=0.01, clip=1.0, bits=7, n=1, dim=64)
    std = decoded_noise_std(defense, 1)
    without_rounding = defense.gamma * np.sqrt(discrete_gaussian_variance(defense.local_sigma(1) ** 2))
    assert std > 1.08 * without_rounding
    errors = _isolated_errors(defense, 1, 20_000 // 64, 64, seed=3, norm=0.9)
    assert errors.std() == pytest.approx(std, rel=0.03)


@pytest.mark.parametrize("defense", ["dp-fedavg(noise_multiplier=1,clip=1)", "ddgauss(noise_multiplier=0.1)"])
def test_bayes_audit_under_aggregator_noise_at_probe_cohort_one_beats_olsr(defense):
    from fltr_audit.runs.audit import run_audit

    config = {"data": "synthetic:mq2008?queries=600", "fold": 1, "normalization": "zscore", "queries": None,
              "algo": "fpdgd", "rounds": 2, "clients": 20, "queries_per_client": 2, "ranker": "linear",
              "train_click_model": "perfect", "params": {},
              "probe": {"split": "vali", "click_models": ["navigational", "informational"], "cohort": 1,
                        "queries_per_client": 1, "min_shown": 10, "require_click": True, "counterfactual": 5},
              "defense": defense, "attacks": ["bayes", "olsr"], "epsilon_audit": False, "audit_trials": 100,
              "seed": 0}
    rows = run_audit(config)["attacks"]
    rows = rows[rows["averaging"] == "macro"].set_index(["click_model", "attack"])["auc"]
    for model in ("navigational", "informational"):
        assert rows[(model, "bayes")] >= rows[(model, "olsr")], rows


def test_noise_model_refuses_shuffle_and_adaptive_clipping():
    from defenses.stack import parse_defense
    from fltr_audit.runs.noise_model import noise_model

    with pytest.raises(FltrError, match="^attacks: bayes: .*cannot link a message"):
        noise_model(parse_defense("dp-local-laplace(eps=4.5)+shuffle"))
    with pytest.raises(FltrError, match="^attacks: bayes: .*quantile"):
        noise_model(parse_defense("dp-fedavg(quantile=0.5)"))
    with pytest.raises(FltrError, match="two noise mechanisms"):
        noise_model(parse_defense("dp-local-laplace(eps=4.5)+dp-fedavg"))


def test_bayes_under_server_malicious_isolation_with_dp_fedavg_and_a_global_model_beyond_the_clip():
    """The aggregator clips each member's *update* (the engine passes it the served model), so
    isolation leaves the target's clipped update plus N(0, (z C)^2): bayes beats OLSR."""
    from attacks.view import client_updates
    from defenses.dp_fedavg import clip_updates
    from defenses.stack import parse_defense
    from fltr_audit.runs.noise_model import noise_model
    from fltr_audit.engine.malicious import malicious_probe

    rng = np.random.default_rng(8)
    data = _data(40, (11, 14), 46, rng)
    algo = FPDGD(make_ranker("linear", 46), cascade_model("informational", 3), lr=0.1, k=10)
    g = 3.0 * rng.normal(size=46) / np.sqrt(46)                                   # ||g|| about 3 > C = 1
    stack = parse_defense("dp-fedavg(noise_multiplier=0.3,clip=1)")
    rounds = malicious_probe(algo, g, data, seed=0, cohort_size=5, aggregator=stack.aggregator)
    errors = []
    for r in rounds:
        isolated, _ = client_updates(r.batch.view, "bayes")
        raw = Bayes(algo).replay(r.batch.view, r.batch.truth.clicks[:, None], np.arange(1))[0, 0]
        errors.append(isolated[0] - clip_updates(raw[None], 1.0)[0])
    assert np.concatenate(errors).std() == pytest.approx(0.3, rel=0.05)            # z C: noise and nothing else
    auc = {}
    for attack in (Bayes(algo, noise_model(stack, members=5)), OLSR()):
        rows = [score_guess(attack.guess(r.batch.view), r.batch, min_shown=10, require_click=True) for r in rounds]
        auc[attack.name] = np.nanmean(np.concatenate([x["auc"].to_numpy() for x in rows]))
    assert auc["bayes"] > auc["olsr"] and auc["bayes"] > 0.75, auc


def test_posterior_log_odds_is_the_marginal_and_keeps_near_point_masses_apart():
    """expit(log-odds) equals the marginal computed directly; where the marginal rounds to
    exactly 1 the log-odds is the analytic gap to the best alternative."""
    from attacks.bayes_posterior import posterior_log_odds

    rng = np.random.default_rng(5)
    vectors = click_vectors(3)
    logpost = rng.normal(size=(6, 8))
    post = np.exp(logpost) / np.exp(logpost).sum(1, keepdims=True)
    np.testing.assert_allclose(expit(posterior_log_odds(logpost, vectors)), post @ vectors, atol=1e-12)
    sharp = np.full((2, 8), -np.inf)
    sharp[:, 0b011] = 0.0                                               # the point mass: positions 0 and 1
    sharp[0, 0b001], sharp[1, 0b001] = -1000.0, -2000.0                 # runner-up drops position 1
    odds = posterior_log_odds(sharp, vectors)
    np.testing.assert_allclose(odds[:, 1], [1000.0, 2000.0])
    assert (odds[:, 0] == LOG_ODDS_BOUND).all() and (odds[:, 2] == -LOG_ODDS_BOUND).all()


def test_a_refined_attack_name_reaches_the_per_list_rows_and_the_leakage_test():
    """bayes on two lists per message reports itself as bayes-approx: the per-list rows carry the
    same name, so the leakage verdict tests it per list (not on the run means alone)."""
    from fltr_audit.runs.audit import run_audit
    from reports.leakage import leakage_table

    config = {"data": "synthetic:mq2008?queries=200", "fold": 1, "normalization": "zscore", "queries": None,
              "algo": "fpdgd", "rounds": 2, "clients": 20, "queries_per_client": 2, "ranker": "linear",
              "train_click_model": "perfect", "params": {},
              "probe": {"split": "vali", "click_models": ["navigational"], "cohort": 100,
                        "queries_per_client": 2, "min_shown": 10, "require_click": True, "counterfactual": 3},
              "defense": "none", "attacks": ["bayes"], "epsilon_audit": False, "audit_trials": 100, "seed": 0}
    tables = run_audit(config)
    assert set(tables["attacks"]["attack"]) == set(tables["per_query"]["attack"]) == {"bayes-approx"}
    tables = {name: frame.assign(run_key="r") for name, frame in tables.items() if isinstance(frame, pd.DataFrame)}
    leak = leakage_table(tables, ["defense", "click_model"])
    assert (leak["basis"] == "per list").all(), leak[["attack", "basis"]]
