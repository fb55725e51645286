"""Secure aggregation edge cases (issue 15): no survivor, a threshold of one holder, a cohort of
one, the weight column's headroom; non-finite models stop training naming round and defense."""

from __future__ import annotations

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
