"""Secure aggregation edge cases (issue 15): no survivor, a threshold of one holder, a cohort of
one, the weight column's headroom; non-finite models stop training naming round and defense."""

from __future__ import annotations

import re

import numpy as np
import pytest

from defenses.secagg import IdealSecAgg
from defenses.secagg_protocol import SecAggProtocol, neighbour_graph, run_protocol
from defenses.stack import parse_defense
from fltr_audit.engine.aggregation import weighted_mean
from fltr_audit.errors import FltrError
from fltr_audit.engine.messages import Messages
from fltr_audit.engine.aggregation import RoundDefenses
from fltr_audit.engine.training import TrainSettings


def _messages(n, dim=4, weights=None, seed=0):
    rng = np.random.default_rng(seed)
    n_c = rng.integers(1, 5, n) if weights is None else np.asarray(weights)
    return Messages(n_interactions=n_c, vector=rng.uniform(-0.5, 0.5, (n, dim)))


@pytest.mark.parametrize("agg", [IdealSecAgg(drop=0.999), SecAggProtocol(drop=0.999)], ids=["ideal", "protocol"])
def test_every_client_dropping_out_aborts_the_round(agg):
    with pytest.raises(FltrError, match="round aborted"):
        agg.aggregate(_messages(6), np.arange(6), np.random.default_rng(1))


def test_protocol_with_no_survivor_aborts_like_a_short_threshold():
    n = 5
    inputs = np.zeros((n, 2), dtype=np.uint64)
    graph = neighbour_graph(n, 0, np.random.default_rng(0))
    with pytest.raises(FltrError, match=r"only 0 of the 5 share holders .* threshold t = 3; round aborted"):
        run_protocol(inputs, 32, graph, np.ones(n, dtype=bool), 0.5)


def test_a_threshold_giving_t_one_is_refused():
    # complete graph of 8: 8 holders, t = floor(0.1 * 8) + 1 = 1: any single holder unmasks
    agg = SecAggProtocol(threshold=0.1)
    with pytest.raises(FltrError, match=r"threshold=0.1 gives t = 1 of 8"):
        agg.aggregate(_messages(8), np.arange(8), np.random.default_rng(2))
    SecAggProtocol(threshold=0.2).aggregate(_messages(8), np.arange(8), np.random.default_rng(2))  # t = 2


@pytest.mark.parametrize("threshold,k", [(0.5, 0), (0.3, 0), (0.1, 0), (1 / 3, 0), (np.nextafter(0.2, 0), 0),
                                         (0.3, 4), (0.2, 4)])
def test_the_smallest_cohort_is_where_the_protocol_first_runs(threshold, k):
    """``SecAggProtocol.min_cohort`` against the protocol itself: a cohort of 1 to 13 clients
    aggregates (no FltrError) exactly when it has at least ``min_cohort`` clients, and
    ``check_cohort`` refuses exactly the others with the protocol's own t and share holders.
    Catches: t taken from the cohort instead of the share holders (k = 4: 5 holders past 5 clients),
    1 / threshold trusted where the float product falls short (5 * 0.19999999999999998 < 1: 6
    clients, not 5), a cohort of one let through, a message that miscounts the holders."""
    agg = SecAggProtocol(threshold=threshold, k=k)
    for n in range(1, 14):
        try:
            agg.aggregate(_messages(n), np.arange(n), np.random.default_rng(n))
            refused = None
        except FltrError as exc:
            refused = str(exc)
        assert (refused is None) == (n >= agg.min_cohort), (n, agg.min_cohort, refused)
        if refused is None:
            agg.check_cohort(n)
            continue
        with pytest.raises(FltrError) as door:
            agg.check_cohort(n)
        holders = n if n == 1 else int(re.search(r"gives t = 1 of (\d+) share holders", refused).group(1))
        clients = "1 client" if n == 1 else f"{n} clients"
        assert f"a cohort of {clients} gives t = 1 of its {holders} share holders" in str(door.value)
        assert f"{agg.min_cohort} or more clients" in str(door.value)


def test_fixed_point_decodes_each_encoding_within_one_resolution_in_every_ring():
    """``FixedPoint`` in rings of 20, 32, 63 and 64 bits, values across [-8, 8] (negative ones wrap to
    the ring's top half): each decodes within one resolution of its value, and a sum of four
    encodings within four. Catches: a ring mask that drops the lowest bit (2^bits - 2, or 2^64 - 2
    in the 64-bit ring), the mask of another width, a negative value read back unsigned."""
    from defenses.secagg_protocol import FixedPoint

    rng = np.random.default_rng(5)
    x = np.linspace(-8.0, 8.0, 2001)
    for bits in (20, 32, 63, 64):
        codec = FixedPoint.for_cohort(4, 8.0, bits)
        codes = codec.encode(x, rng)
        assert bits == 64 or (codes < np.uint64(2) ** np.uint64(bits)).all()
        assert (np.abs(codec.decode(codes) - x) < codec.resolution).all()
        total = sum(codec.encode(x, rng) for _ in range(4)) & np.uint64(2**bits - 1)  # uint64 sums wrap mod 2^64
        assert (np.abs(codec.decode(total) - 4 * x) < 4 * codec.resolution).all()


@pytest.mark.parametrize("threshold,k,suggested", [(0.1, 4, 0.2), (0.19, 4, 0.2), (0.3, 2, 0.3334)])
def test_a_degree_whose_holders_never_give_t_two_is_refused_when_built(threshold, k, suggested):
    """k + 1 holders with floor(threshold (k + 1)) = 0: the protocol itself refuses every cohort of 2 to
    12 clients (its own check, one round each), and the defense is refused when built, naming the
    k + 1 holders and the smallest four-decimal threshold that works (0.3333 would not for k = 2).
    Catches: the check that lets such a degree through to fail in round 1, a suggestion that fails."""
    for n in range(2, 13):
        graph = neighbour_graph(n, k, np.random.default_rng(n))
        with pytest.raises(FltrError, match="gives t = 1"):
            run_protocol(np.zeros((n, 2), dtype=np.uint64), 32, graph, np.zeros(n, dtype=bool), threshold)
    with pytest.raises(FltrError, match=rf"t = 1 of the k \+ 1 = {k + 1} share holders .* raise threshold to "
                                        rf"at least {suggested}$"):
        SecAggProtocol(threshold=threshold, k=k)
    assert SecAggProtocol(threshold=suggested, k=k).min_cohort <= k + 1


@pytest.mark.parametrize("extra,option,message", [
    (["--defense", "secagg-protocol(threshold=0.3)", "--clients", "3"], "--defense",
     "a cohort of 3 clients gives t = 1 of its 3 share holders at threshold=0.3"),
    (["--defense", "norm-bound+secagg-protocol(threshold=0.3)", "--clients", "3"], "--defense", "4 or more clients"),
    (["--defense", "secagg", "--clients", "1"], "--defense", "a cohort of 1 client is below the 2 it needs"),
    (["--defense", "secagg-protocol(threshold=0.3)", "--probe-cohort", "3"], "--probe-cohort",
     "a cohort of 3 clients gives t = 1"),
    (["--defense", "secagg-protocol(threshold=0.1,k=4)"], "--defense", "raise threshold to at least 0.2"),
])
def test_a_cohort_secure_aggregation_cannot_hide_is_refused_at_the_door(tmp_path, capsys, extra, option, message):
    """An audit whose training or probe cohort is below what its secure aggregator needs: one line
    naming the option, exit 2, no store -- not a run that fails after training."""
    from fltr_audit.cli import main

    store = tmp_path / "store"
    base = ["audit", "--data", "synthetic:mq2008?queries=60", "--rounds", "1", "--clients", "10", "--attack", "olsr",
            "--click-model", "perfect", "--store", str(store), "--quiet"]
    assert main(base + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fltr-audit: error: {option}: ") and err.count("\n") == 1 and message in err, err
    assert not store.exists()


@pytest.mark.parametrize("agg", [IdealSecAgg(), SecAggProtocol()], ids=["ideal", "protocol"])
def test_a_cohort_of_one_is_refused(agg):
    with pytest.raises(FltrError, match="round aborted"):
        agg.aggregate(_messages(1), np.arange(1), np.random.default_rng(3))


def test_weight_column_that_would_wrap_the_ring_is_refused():
    # values fit 16 bits (range 0.001), but the weights sum to 10 x 10,000 > 2^16: once the mean
    # came out 100,000 / (100,000 mod 65,536) = 2.9 times too large, silently
    msgs = _messages(10, weights=np.full(10, 10_000))
    with pytest.raises(FltrError, match=r"bits=16: the weight sum 100000 .* would wrap"):
        SecAggProtocol(bits=16, range=0.001).aggregate(msgs, np.arange(10), np.random.default_rng(4))
    fits = _messages(10, weights=np.full(10, 6_000))
    agg = SecAggProtocol(bits=17, range=0.001).aggregate(fits, np.arange(10), np.random.default_rng(4))
    exact = weighted_mean(np.clip(fits.vector, -0.001, 0.001), fits.n_interactions)
    assert np.abs(agg.mean - exact).max() <= agg.stats["error_bound"]


@pytest.mark.parametrize("text, culprit", [
    ("clip(sensitivity=1e308)+dp-distributed(eps=1e-308)", "sensitivity=1e308"),
    ("clip(sensitivity=1e50)+dp-distributed(eps=1e-50)", "Delta/eps"),
    ("dp-local-laplace(eps=1e-20,sensitivity=1)", "Delta/eps"),
    ("dp-gaussian(sigma=1e20)", "sigma*clip"),
    ("dp-gaussian(sigma=1e-300)", "sigma=1e-300"),
])
def test_values_that_would_make_the_model_nan_are_refused(text, culprit):
    with pytest.raises(FltrError, match=culprit.replace("*", r"\*")):
        parse_defense(text)


def test_a_model_that_becomes_non_finite_stops_training_naming_round_and_defense():
    from fltr_audit.engine.algorithms.fpdgd import FPDGD
    from fltr_audit.engine.clicks import cascade_model
    from fltr_audit.engine.data.synthetic import fold_split, generate
    from fltr_audit.engine.federation import train
    from fltr_audit.engine.rankers import LinearRanker

    class Overflow:
        """A client defense that overflows on the second round (as huge noise would)."""

        name = "overflow"

        def apply(self, messages, global_params, rng):
            return messages if not np.any(global_params) else messages.with_updates(
                np.full_like(messages.vector, np.inf), global_params)

    splits = fold_split(generate("mq2008", 60, 0), 1)
    algo = FPDGD(LinearRanker(splits.train.n_features), cascade_model("perfect", splits.train.n_levels))
    with pytest.raises(FltrError, match=r"round 2: the global model became NaN or infinite under the defense "
                                        r"'overflow\+plain'"):
        train(algo, splits.train, TrainSettings(clients=4, queries_per_client=2, rounds=3, seed=0),
              defenses=RoundDefenses(client=tuple([Overflow()])))


def test_sharekeys_counts_the_bytes_of_the_share_messages_it_encrypts(monkeypatch):
    """Round 1 (ShareKeys) alone, its later rounds skipped: the bytes it adds up and down are those of
    the encrypted share messages it produced -- each ciphertext (AES-GCM: payload and 16-byte tag)
    with its 12-byte nonce, sent once by its client and delivered once to its holder -- on a complete
    graph and on a k-regular one (catches a count per client instead of per neighbour)."""
    from defenses import secagg_protocol as sp

    for n, k in ((6, 0), (9, 4)):
        graph = neighbour_graph(n, k, np.random.default_rng(n))
        inputs = np.zeros((n, 3), dtype=np.uint64)
        counted = {}
        for skipped in (("share_keys", "collect_masked_inputs", "unmask"), ("collect_masked_inputs", "unmask")):
            with monkeypatch.context() as patch:
                for name in skipped:
                    patch.setattr(sp, name, lambda state: None)
                result = run_protocol(inputs, 32, graph, np.zeros(n, dtype=bool), 0.5)
            counted[len(skipped)] = (result.stats["bytes_up"], result.stats["bytes_down"], result.transcript)
        sent = sum(len(ct) + 12 for ct in counted[2][2]["ciphertexts"].values())
        assert len(counted[2][2]["ciphertexts"]) == n * graph.shape[1]
        assert counted[2][0] - counted[3][0] == sent and counted[2][1] - counted[3][1] == sent
