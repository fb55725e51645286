"""bayes for FedIPS / FedAvg: the count-matrix prior is the session process's law, the posterior
equals a brute force by plain loops, noise-free messages replayed in their own order give every
clicked slot back, and under Laplace noise its AUC is not below OLSR's or the heuristics'."""

import dataclasses
import itertools

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from attacks.bayes_fedips import BayesFedIPS, canonical_order, count_matrices, session_count_log_prior
from attacks.olsr import OLSR
from attacks.registry import make_attack
from attacks.scoring import score_guess
from defenses.stack import parse_defense
from fltr_audit.engine.algorithms.fedips import FedIPS
from fltr_audit.engine.algorithms.fedips_users import simulate_log
from fltr_audit.engine.algorithms.logging_policy import LoggingPolicy
from fltr_audit.runs.noise_model import noise_model
from fltr_audit.cli import main
from fltr_audit.engine.clicks import PositionBasedModel
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.probe import probe
from fltr_audit.engine.rankers import LinearRanker


def _setup(n=12, B=1, K=3, m=3, F=4, propensity="true", lr=0.05, gamma=1.0, defense="none", seed=0):
    """A FedIPS (or FedAvg) on random LETOR-like data and one probe round of n clients."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(K + 1, K + 5, n * B)
    ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    data = Dataset(features=rng.random((ptr[-1], F)).astype(np.float32),
                   labels=rng.integers(0, 3, ptr[-1]).astype(np.int8), query_ptr=ptr, qids=np.arange(n * B),
                   n_levels=3)
    alg = FedIPS(LinearRanker(F), PositionBasedModel(gamma=gamma, n_levels=3), LoggingPolicy(rng.normal(size=F), k=K),
                 lr_local=lr, clicks_per_client=m, propensity=propensity)
    stack = parse_defense(defense)
    g = rng.normal(size=F)
    batch = probe(alg, g, data, seed=seed + 1, queries_per_client=B, cohort_size=n, client_defenses=stack.client)[0]
    return alg, batch, noise_model(stack)


def test_count_matrices_are_every_composition():
    got = {tuple(r) for r in count_matrices(4, 3)}
    want = {c for c in itertools.product(range(5), repeat=3) if sum(c) == 4}
    assert got == want and len(count_matrices(4, 3)) == len(want)
    assert count_matrices(10, 5).shape == (1001, 5)


def _session_prior_by_sessions(p, m, sessions):
    """P(N) by walking the sessions one by one (every click vector of every session, empty ones
    included, plain loops), up to ``sessions`` sessions; dict count tuple -> probability."""
    B, K = p.shape
    alive = {((0,) * (B * K)): 1.0}
    done = {}
    for s in range(sessions):
        b = s % B
        nxt = {}
        for counts, mass in alive.items():
            for bits in itertools.product([0, 1], repeat=K):
                prob = mass
                for i in range(K):
                    prob *= p[b, i] if bits[i] else 1.0 - p[b, i]
                new, total = list(counts), sum(counts)
                for i in range(K):
                    if bits[i] and total < m:
                        new[b * K + i] += 1
                        total += 1
                target = done if total == m else nxt
                target[tuple(new)] = target.get(tuple(new), 0.0) + prob
        alive = nxt
    return done, sum(alive.values())


@pytest.mark.parametrize("B,K,m", [(1, 3, 3), (2, 2, 3), (3, 2, 2)])
def test_session_prior_equals_session_by_session_enumeration(B, K, m):
    rng = np.random.default_rng(B * 10 + K)
    p = rng.uniform(0.2, 0.7, (2, B, K))
    p[1, 0, 1] = 0.0                                                    # an empty slot
    counts = count_matrices(m, B * K).reshape(-1, B, K)
    fast = np.exp(session_count_log_prior(p, m, counts))
    for r in range(2):
        slow, left = _session_prior_by_sessions(p[r], m, 120)
        assert left < 1e-12
        np.testing.assert_allclose(fast[r], [slow.get(tuple(c.ravel()), 0.0) for c in counts], atol=1e-12)
    assert (fast[1][counts[:, 0, 1] > 0] == 0).all()


def test_session_prior_matches_simulate_log_frequencies():
    """The prior is the law of the engine's own logs: 100,000 simulated logs, every count matrix's
    frequency within 4.5 binomial standard errors (and the multinomial approximation is not)."""
    B, K, m, draws = 2, 3, 4, 100_000
    p = np.random.default_rng(7).uniform(0.05, 0.6, (1, B, K))
    counts = count_matrices(m, B * K).reshape(-1, B, K)
    prior = np.exp(session_count_log_prior(p, m, counts))[0]
    slot, pos, n_clicks, _, _ = simulate_log(np.repeat(p, draws, axis=0), m, 40, np.random.default_rng(8))
    assert (n_clicks == m).all()
    seen = np.zeros((draws, B * K), dtype=np.int64)
    np.add.at(seen, (np.repeat(np.arange(draws), m), (slot * K + pos).ravel()), 1)
    radix = (m + 1) ** np.arange(B * K)
    freq = (np.sort(seen @ radix)[:, None] == (counts.reshape(len(counts), -1) @ radix)[None, :]).mean(0)
    z = np.abs(freq - prior) / np.sqrt(prior * (1 - prior) / draws)
    assert z.max() < 4.5
    pi = (p / p.sum()).ravel()
    multinomial = stats.multinomial.pmf(counts.reshape(len(counts), -1), m, pi)
    assert (np.abs(freq - multinomial) / np.sqrt(multinomial * (1 - multinomial) / draws)).max() > 10


def _brute_force(alg, view, loglik, gammas, prior):
    """Posterior P(N_slot >= 1) by loops over messages, count matrices and gamma nodes: the prior
    from the session walk, the canonical log built by loops, the hinge SGD pass in float64 with a
    loop over the shown documents, the noise density ``loglik(observed update, raw update)``."""
    g = view.global_params
    shown = view.interactions.shown
    n, B, K = shown.shape
    m = alg.m
    out = np.zeros((n, B, K))
    for c in range(n):
        ok = shown[c] >= 0
        labels = np.where(ok, view.documents.labels[np.maximum(shown[c], 0)], -1)
        X = np.where(ok[..., None], view.documents.features[np.maximum(shown[c], 0)], 0.0).astype(np.float64)
        observed = view.messages.updates(g)[c]
        post, clicked = [], []
        for N in itertools.product(range(m + 1), repeat=B * K):
            if sum(N) != m:
                continue
            N = np.array(N).reshape(B, K)
            if (N[~ok] > 0).any():
                continue
            log = [(b, i) for r in range(m) for b in range(B) for i in range(K) if N[b, i] > r]
            for gamma in gammas:
                if prior == "uniform":
                    p_n = 1.0
                else:
                    probs = alg.click_model.click_prob(labels[None], np.array([gamma]))[0]
                    table, _ = _session_prior_by_sessions(probs, m, 150)
                    p_n = table.get(tuple(N.ravel()), 0.0)
                w = g.copy()
                for b, i in log:
                    s = X[b] @ w
                    grad = np.zeros_like(w)
                    for j in range(K):
                        if ok[b, j] and 1.0 - (s[i] - s[j]) > 0:
                            grad += X[b, j] - X[b, i]
                    ips = 1.0 if alg.propensity == "none" else (i + 1.0) ** gamma
                    w = w - alg.lr_local * ips * grad
                post.append((np.log(p_n) if p_n > 0 else -np.inf) - np.log(len(gammas)) + loglik(observed, w - g))
                clicked.append(N > 0)
        post = np.array(post)
        weight = np.exp(post - post.max())
        out[c] = np.tensordot(weight, np.array(clicked, dtype=float), axes=1) / weight.sum()
    return out


@pytest.mark.parametrize("B,K,propensity,prior,defense", [
    (1, 3, "true", "click-model", "dp-local-laplace(eps=20)"),
    (2, 2, "none", "uniform", "dp-gaussian(sigma=1,clip=0.05)"),
    (1, 3, "none", "click-model", "dp-gaussian(sigma=0.5,clip=0.02)"),
])
def test_posterior_equals_brute_force(B, K, propensity, prior, defense):
    alg, batch, noise = _setup(n=8, B=B, K=K, m=3, propensity=propensity, defense=defense)
    attack = BayesFedIPS(alg, noise, prior=prior, gamma_nodes=3)
    clip = noise.clips[0]

    def loglik(observed, raw):
        norm = np.abs(raw).sum() if clip.norm == "l1" else np.linalg.norm(raw)
        clipped = raw * min(1.0, clip.bound / norm) if norm > 0 else raw
        if noise.kind == "laplace":
            return stats.laplace.logpdf(observed - clipped, scale=noise.scale).sum()
        return stats.norm.logpdf(observed - clipped, scale=noise.scale).sum()

    expected = _brute_force(alg, batch.view, loglik, attack.gammas, prior)
    guess = attack.guess(batch.view)
    mask = batch.view.interactions.shown >= 0
    assert guess.attack == ("bayes-approx" if prior == "click-model" else "bayes-uniform-approx")
    np.testing.assert_allclose(np.where(mask, expit(guess.score), 0.0), np.where(mask, expected, 0.0), atol=1e-6)
    assert 0.02 < expected[mask].mean() < 0.98                          # the posterior is not degenerate


def _replayable_logs(alg, gamma):
    """Make ``alg`` log its clicks in the attack's canonical order with every gamma_u = ``gamma``:
    the same clicked slots and counts, only the order and the users' bias changed."""
    simulate = alg.simulate

    def canonical(data, queries, client_ids, rng):
        log = simulate(data, queries, client_ids, rng)
        n, m = log.click_slot.shape
        assert (log.n_clicks == m).all()
        counts = np.zeros(log.shown.shape, dtype=np.int64)
        np.add.at(counts, (np.repeat(np.arange(n), m), log.click_slot.ravel(), log.click_pos.ravel()), 1)
        slot, pos = canonical_order(counts)
        return dataclasses.replace(log, click_slot=slot, click_pos=pos, gammas=np.full(n, gamma))

    alg.simulate = canonical


@pytest.mark.parametrize("propensity", ["true", "none"])
def test_without_noise_recovers_every_clicked_slot_when_the_replay_is_the_clients(propensity):
    alg, batch, _ = _setup(n=40, K=5, m=10, F=46, propensity=propensity, lr=0.001, seed=3)
    attack = BayesFedIPS(alg, gamma_nodes=1)                            # gamma_u known: the one node
    _replayable_logs(alg, attack.gammas[0])
    batch = probe(alg, batch.view.global_params, batch.view.documents, seed=4, cohort_size=40)[0]
    guess = attack.guess(batch.view)
    mask = batch.view.interactions.shown >= 0
    assert ((guess.decision == batch.truth.clicks) | ~mask).all()
    assert batch.truth.clicks.sum() > 40 and (~batch.truth.clicks & mask).sum() > 20


def test_without_noise_on_the_clients_own_logs_nearly_every_list_is_recovered():
    """Real logs (their own session order, gamma_u off the grid): the replay is approximate."""
    alg, batch, _ = _setup(n=40, K=5, m=10, F=46, lr=0.001, seed=5)
    guess = make_attack("bayes", algorithm=alg).guess(batch.view)        # the registry picks BayesFedIPS
    assert guess.attack == "bayes-approx"
    mask = batch.view.interactions.shown >= 0
    exact = ((guess.decision == batch.truth.clicks) | ~mask).all(axis=(1, 2))
    olsr = ((OLSR().guess(batch.view).decision == batch.truth.clicks) | ~mask).all(axis=(1, 2))
    assert exact.mean() >= 0.9 and exact.sum() > olsr.sum()


@pytest.mark.parametrize("seed,eps", [(0, 45.0), (1, 45.0), (2, 450.0)])
def test_auc_not_below_olsr_and_the_heuristics_under_laplace_noise(seed, eps):
    """Both priors: the click-model prior knows the labels (as the server does), the uniform one
    reads the message only, as OLSR and the heuristics do."""
    alg, batch, noise = _setup(n=150, K=5, m=6, F=46, lr=0.01, defense=f"dp-local-laplace(eps={eps})", seed=seed)
    auc = {}
    attacks = {"bayes": BayesFedIPS(alg, noise), "bayes-uniform": BayesFedIPS(alg, noise, prior="uniform"),
               **{name: make_attack(name, k=5) if name == "distance" else make_attack(name)
                  for name in ("olsr", "olsr-l1", "score", "prob", "distance")}}
    for name, attack in attacks.items():
        rows = score_guess(attack.guess(batch.view), batch, min_shown=5, require_click=True)
        auc[name] = rows["auc"].mean()
    best = max(v for k, v in auc.items() if not k.startswith("bayes"))
    assert auc["bayes"] >= best and auc["bayes-uniform"] >= best, auc


def test_refusals_are_one_line_errors():
    alg, batch, _ = _setup(n=6, K=5, m=10, F=5)
    estimated = FedIPS(alg.ranker, alg.click_model, alg.policy, propensity="estimated",
                       relevance_params=np.zeros(6), clicks_per_client=10)
    with pytest.raises(FltrError, match="^attacks: bayes: .*estimated propensities"):
        make_attack("bayes", algorithm=estimated).guess(batch.view)
    wide, wide_batch, _ = _setup(n=6, B=2, K=5, m=10, F=5)
    with pytest.raises(FltrError, match="^attacks: bayes: .*92378 count matrices.*20000"):
        make_attack("bayes", algorithm=wide).guess(wide_batch.view)
    with pytest.raises(FltrError, match="^attacks: bayes: .*randomizes metric values"):
        BayesFedIPS(alg, noise_model(parse_defense("rr(p=0.9)"))).guess(batch.view)
    cohort = probe(alg, batch.view.global_params, batch.view.documents, seed=0, cohort_size=6,
                   aggregator=parse_defense("secagg").aggregator)[0]
    with pytest.raises(FltrError, match="^attacks: bayes: under secure aggregation the aggregate of 6"):
        BayesFedIPS(alg).guess(cohort.view)
    with pytest.raises(FltrError, match="^attacks: bayes: .*supported: fedips, fedavg"):
        BayesFedIPS(type("FedIPSLike", (), {"name": "fedips"})()).guess(batch.view)


def test_too_many_candidates_exits_2_through_the_cli(capsys):
    code = main(["audit", "fedips", "--data", "synthetic:mq2008?queries=40", "--rounds", "1",
                 "--clients", "5", "--click-model", "pbm", "--attack", "bayes", "--probe-queries", "2",
                 "--no-epsilon-audit", "--counterfactual", "1", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--attack: bayes" in err[0] and "probe one query per client" in err[0]
