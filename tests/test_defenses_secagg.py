"""Secure aggregation: Shamir sharing, the double-masking protocol, the ideal mode.

Masks and keys come from the OS's cryptographic generator and cannot be seeded, so the
statistical tests on masked vectors use alpha = 1e-4 (a false alarm once in 10,000 runs).
"""

import numpy as np
import pytest
from scipy import stats

from defenses import shamir
from defenses.secagg import IdealSecAgg
from defenses.secagg_protocol import FixedPoint, SecAggProtocol, neighbour_graph, run_protocol
from fltr_audit.engine.aggregation import RoundDefenses, weighted_mean
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Messages

ALPHA = 1e-4


def _ring_inputs(n, dim, bits, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2**bits, size=(n, dim), dtype=np.uint64) if bits < 64 else \
        rng.integers(0, 2**63, size=(n, dim), dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, (n, dim), dtype=np.uint64)


def _exact_sum(rows, bits):
    """The ring sum with Python integers (no numpy wrap-around involved)."""
    return [sum(int(v) for v in col) % 2**bits for col in np.asarray(rows).T]


# --- Shamir --------------------------------------------------------------------------------

def test_shamir_any_t_shares_recover_and_lagrange_matches_python_ints():
    rng = np.random.default_rng(20)
    secrets = shamir.bytes_to_field(rng.bytes(3 * 32), 3)
    xs = np.array([3, 7, 8, 11, 20, 21, 40])
    shares = shamir.share(secrets, xs, 4)
    for subset in ([0, 1, 2, 3], [6, 4, 2, 0], [1, 3, 5, 6, 0]):
        got = shamir.reconstruct(np.tile(xs[subset], (3, 1)), shares[:, subset])
        np.testing.assert_array_equal(got, secrets)
    # brute force with Python integers and Fermat inverses
    sub = [0, 2, 4, 5]
    p = shamir.PRIME
    for s in range(3):
        for c in range(secrets.shape[1]):
            total = 0
            for i in sub:
                w = 1
                for j in sub:
                    if j != i:
                        w = w * int(xs[j]) * pow(int(xs[j]) - int(xs[i]), p - 2, p) % p
                total = (total + w * int(shares[s, i, c])) % p
            assert total == secrets[s, c]
    # t - 1 shares give a wrong value (by overwhelming probability over the coefficients)
    wrong = shamir.reconstruct(np.tile(xs[:3], (3, 1)), shares[:, :3])
    assert (wrong != secrets).any()
    assert shamir.field_to_bytes(secrets)[1] == shamir.field_to_bytes(secrets[1:2])[0]


def test_neighbour_graph_is_k_regular_and_symmetric():
    g = neighbour_graph(50, 6, np.random.default_rng(21))
    assert g.shape == (50, 6)
    adj = np.zeros((50, 50), bool)
    adj[np.repeat(np.arange(50), 6), g.ravel()] = True
    assert (adj == adj.T).all() and not adj.diagonal().any() and (adj.sum(1) == 6).all()
    full = neighbour_graph(5, 0, np.random.default_rng(0))
    np.testing.assert_array_equal(full[2], [0, 1, 3, 4])


# --- protocol: exact sums, dropouts, abort --------------------------------------------------

@pytest.mark.parametrize("n, degree, bits", [(12, 0, 64), (20, 4, 32), (9, 0, 16)])
def test_unmasked_sum_is_exact_without_dropouts(n, degree, bits):
    x = _ring_inputs(n, 7, bits, seed=n)
    res = run_protocol(x, bits, neighbour_graph(n, degree, np.random.default_rng(0)), np.zeros(n, bool), 0.5)
    assert res.total.tolist() == _exact_sum(x, bits)


@pytest.mark.parametrize("n, degree, bits", [(12, 0, 64), (30, 6, 32)])
def test_unmasked_sum_is_exact_with_dropouts(n, degree, bits):
    x = _ring_inputs(n, 5, bits, seed=3 * n)
    dropped = np.zeros(n, bool)
    dropped[[1, 4, 7]] = True
    res = run_protocol(x, bits, neighbour_graph(n, degree, np.random.default_rng(1)), dropped, 0.5)
    assert res.total.tolist() == _exact_sum(x[~dropped], bits)
    assert res.stats["dropouts"] == 3
    # the server redid a mask key agreement for every (dropout, surviving neighbour) pair
    graph = neighbour_graph(n, degree, np.random.default_rng(1))
    redo = sum(int((~dropped[graph[u]]).sum()) for u in np.flatnonzero(dropped))
    assert res.stats["mask_key_agreements"] == graph.size + redo


def test_fewer_than_t_survivors_abort():
    n = 10  # complete graph: 10 holders per secret, t = floor(0.5 * 10) + 1 = 6
    x = _ring_inputs(n, 3, 32, seed=5)
    graph = neighbour_graph(n, 0, np.random.default_rng(0))
    dropped = np.arange(n) < 5
    with pytest.raises(FltrError, match=r"only 5 of the 10 share holders .* fewer than the threshold t = 6"):
        run_protocol(x, 32, graph, dropped, 0.5)
    dropped[4] = False  # exactly t survive: fine
    assert run_protocol(x, 32, graph, dropped, 0.5).total.tolist() == _exact_sum(x[~dropped], 32)


# --- what the server sees ------------------------------------------------------------------

def test_masked_vectors_are_uniform_and_independent_of_the_input():
    n, dim, bits = 16, 1500, 32
    graph = neighbour_graph(n, 0, np.random.default_rng(0))
    zeros = np.zeros((n, dim), np.uint64)
    ramp = np.tile((np.arange(dim, dtype=np.uint64) * np.uint64(2**20)) % np.uint64(2**32), (n, 1))
    seen = []
    for x in (zeros, ramp):
        masked = run_protocol(x, bits, graph, np.zeros(n, bool), 0.5).transcript["masked"]
        top = (masked >> np.uint64(bits - 5)).astype(np.int64)  # 32 bins over the ring
        for row in top:  # each masked vector on its own is uniform (Bonferroni over rows)
            assert stats.chisquare(np.bincount(row, minlength=32)).pvalue > ALPHA / n
        seen.append(np.bincount(top.ravel(), minlength=32))
        # no linear trace of the input: masked values uncorrelated with the ramp position
        assert abs(stats.pearsonr(masked.astype(np.float64).ravel(),
                                  ramp.astype(np.float64).ravel()).statistic) < 5 / np.sqrt(n * dim)
    # the bin counts for an all-zero input and a structured input are the same distribution
    assert stats.chi2_contingency(np.array(seen)).pvalue > ALPHA


def test_server_view_contains_no_individual_payload():
    n, dim = 15, 12
    rng = np.random.default_rng(22)
    msgs = Messages(n_interactions=rng.integers(1, 5, n), vector=rng.normal(0, 1, (n, dim)))
    agg = SecAggProtocol(k=4, drop=0.2).aggregate(msgs, np.arange(100, 100 + n), np.random.default_rng(23))
    assert agg.messages is None
    assert set(agg.participants) | set(agg.dropouts) == set(range(100, 100 + n))
    assert not set(agg.participants) & set(agg.dropouts)
    # the protocol's transcript: masked vectors never equal (or contain) any encoded input
    codec = FixedPoint.for_cohort(n, 4 * 64.0, 64)
    x = np.concatenate([codec.encode(msgs.vector * msgs.n_interactions[:, None], np.random.default_rng(0)),
                        msgs.n_interactions.astype(np.uint64)[:, None]], axis=1)
    res = run_protocol(x, 64, neighbour_graph(n, 4, np.random.default_rng(0)), np.zeros(n, bool), 0.5)
    masked = res.transcript["masked"]
    assert not np.isin(x, masked).any()
    for ct in res.transcript["ciphertexts"].values():
        assert isinstance(ct, bytes)  # shares are relayed only encrypted
    assert res.transcript["unmask_shares"].shape[1] == res.stats["threshold"]


# --- fixed point and the aggregator --------------------------------------------------------

def test_fixed_point_headroom_and_unbiased_stochastic_rounding():
    codec = FixedPoint.for_cohort(1000, 256.0, 64)
    assert 2 ** (64 - 1) >= 1000 * (256 * 2**codec.frac + 1)  # n worst-case encodings never wrap
    x = np.full(200_000, 0.3 + 0.25 * codec.resolution)
    dec = codec.decode(codec.encode(x, np.random.default_rng(24)))
    assert set(np.unique(dec - np.floor(x / codec.resolution) * codec.resolution).round(30)) <= {0.0, codec.resolution}
    # mean within 5 standard errors (rounding up w.p. 1/4: SE = resolution * sqrt(3/16 / N))
    assert abs(dec.mean() - x[0]) < 5 * codec.resolution * np.sqrt(3 / 16 / x.size)
    with pytest.raises(FltrError, match="bits = 16"):
        FixedPoint.for_cohort(1000, 256.0, 16)


@pytest.mark.parametrize("bits, drop", [(32, 0.0), (32, 0.25), (64, 0.1)])
def test_mean_is_within_the_stated_fixed_point_error_bound(bits, drop):
    n, dim = 40, 9
    rng = np.random.default_rng(25)
    msgs = Messages(n_interactions=rng.integers(1, 5, n), vector=rng.normal(0, 3, (n, dim)))
    agg = SecAggProtocol(k=8, drop=drop, bits=bits, range=8.0).aggregate(msgs, np.arange(n), np.random.default_rng(26))
    alive = np.isin(np.arange(n), agg.participants)
    exact = weighted_mean(np.clip(msgs.vector[alive], -8, 8), msgs.n_interactions[alive])
    err = np.abs(agg.mean - exact).max()
    assert err <= agg.stats["error_bound"]
    assert agg.stats["clipped_coordinates"] == int((np.abs(msgs.vector) > 8).sum())
    if bits == 32:
        assert err > 0  # the rounding is real, so the bound is being exercised
    assert agg.stats["encryption_key_agreements"] == n * 8  # both ends of each of the n * 8 / 2 edges


def test_ideal_secagg_gives_the_survivors_weighted_mean():
    n, dim = 200, 6
    rng = np.random.default_rng(27)
    msgs = Messages(n_interactions=rng.integers(1, 5, n), vector=rng.normal(0, 1, (n, dim)))
    agg = IdealSecAgg(drop=0.3).aggregate(msgs, np.arange(n) + 7, np.random.default_rng(28))
    alive = np.isin(np.arange(n) + 7, agg.participants)
    assert agg.messages is None and 30 < len(agg.dropouts) < 90
    np.testing.assert_allclose(agg.mean, weighted_mean(msgs.vector[alive], msgs.n_interactions[alive]))
    assert IdealSecAgg().claim.scope == "aggregate" and IdealSecAgg().claim.epsilon == float("inf")


@pytest.mark.parametrize("agg", [IdealSecAgg(), SecAggProtocol()])
def test_secagg_refuses_messages_without_vectors(agg):
    m = Messages(n_interactions=np.full(3, 4), seed=np.arange(3, dtype=np.uint64), metric=np.zeros((3, 4)))
    with pytest.raises(FltrError, match="secure aggregation needs vector messages"):
        agg.aggregate(m, np.arange(3), np.random.default_rng(0))


def test_a_federation_round_under_secagg_protocol_shows_only_the_aggregate():
    federation = pytest.importorskip("fltr_audit.engine.federation")
    from fltr_audit.engine.algorithms.fpdgd import FPDGD
    from fltr_audit.engine.clicks import cascade_model
    from fltr_audit.engine.data.synthetic import generate
    from fltr_audit.engine.rankers import LinearRanker

    data = generate("mq2008", queries=40, seed=0)
    algo = FPDGD(LinearRanker(data.n_features), cascade_model("perfect", data.n_levels))
    params = np.random.default_rng(0).normal(0, 0.1, data.n_features)
    queries = np.arange(20).reshape(10, 2)
    ids = np.arange(10)
    _, _, plain, _ = federation.run_round(algo, params, None, data, queries, ids, 1, 7)
    agg = SecAggProtocol(k=4)
    _, _, secure, _ = federation.run_round(algo, params, None, data, queries, ids, 1, 7,
                                               defenses=RoundDefenses(aggregator=agg))
    assert plain.view.messages is not None and secure.view.messages is None
    assert secure.view.dropouts.size == 0 and secure.view.participants.tolist() == ids.tolist()
    # same seed, same client step: the secure mean is the plain mean up to fixed-point rounding
    np.testing.assert_allclose(secure.view.aggregate, plain.view.aggregate, atol=1e-12)
