"""The probe protocol (Pham, Section 4.1)."""

from dataclasses import dataclass

import numpy as np
import pytest

from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.synthetic import fold_split, generate
from fltr_audit.errors import FltrError
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.engine.probe import probe
from fltr_audit.engine.rankers import LinearRanker


@pytest.fixture(scope="module")
def vali():
    return fold_split(generate("mq2008", queries=260, seed=2), 1).vali   # 52 queries


@pytest.fixture(scope="module")
def model(vali):
    return np.random.default_rng(0).normal(size=vali.n_features)


def alg(vali):
    return FPDGD(LinearRanker(vali.n_features), cascade_model("perfect", 3), lr=0.1)


def test_every_query_once_in_order_by_fresh_clients(vali, model):
    batches = probe(alg(vali), model, vali, seed=1, cohort_size=20)
    assert [len(b.view.participants) for b in batches] == [20, 20, 12]
    queries = np.concatenate([b.view.interactions.queries for b in batches])
    np.testing.assert_array_equal(queries[:, 0], np.arange(vali.n_queries))
    ids = np.concatenate([b.truth.client_ids for b in batches])
    np.testing.assert_array_equal(ids, np.arange(vali.n_queries))
    for b in batches:                                     # the probed model never changes
        np.testing.assert_array_equal(b.view.global_params, model)


def test_deterministic_top10_and_one_update(vali, model):
    batches = probe(alg(vali), model, vali, seed=1, cohort_size=100)
    b = batches[0]
    for c, q in enumerate(b.view.interactions.queries[:, 0]):
        rows = np.arange(vali.query_ptr[q], vali.query_ptr[q + 1])
        scores = vali.features[rows].astype(np.float64) @ model
        top = rows[np.argsort(-scores, kind="stable")][:10]
        np.testing.assert_array_equal(b.view.interactions.shown[c, 0, :len(top)], top)
        # perfect clicks: every relevant shown document, and never a non-relevant one
        labels = vali.labels[top]
        np.testing.assert_array_equal(b.truth.clicks[c, 0, :len(top)] & (labels == 0), False)
        moved = not np.allclose(b.view.messages.vector[c], model)
        assert moved == bool(b.truth.clicks[c, 0].any() and not b.truth.clicks[c, 0, :len(top)].all())
    np.testing.assert_array_equal(b.view.messages.n_interactions, 1)


def test_probe_is_reproducible_and_b_queries_per_client(vali, model):
    a = probe(alg(vali), model, vali, seed=3, queries_per_client=5, cohort_size=4)
    again = probe(alg(vali), model, vali, seed=3, queries_per_client=5, cohort_size=4)
    for x, y in zip(a, again):
        np.testing.assert_array_equal(x.view.messages.vector, y.view.messages.vector)
    # 52 queries, B = 5: ten clients of 5 in cohorts of 4, 4, 2, then one client with the last 2
    assert [b.view.interactions.queries.shape for b in a] == [(4, 5), (4, 5), (2, 5), (1, 2)]
    np.testing.assert_array_equal(np.concatenate([b.view.interactions.queries.ravel() for b in a]),
                                  np.arange(52))
    np.testing.assert_array_equal(a[-1].truth.client_ids, [10])


@dataclass
class AddOne:
    name: str = "add-one"
    claim: PrivacyClaim = PrivacyClaim()

    def apply(self, messages, global_params, rng):
        return messages.replace(vector=messages.vector + 1.0)


def test_probe_messages_go_through_defenses_and_threat_model(vali, model):
    plain = probe(alg(vali), model, vali, seed=1)
    defended = probe(alg(vali), model, vali, seed=1, client_defenses=[AddOne()], threat_model="server-blind")
    np.testing.assert_allclose(defended[0].view.messages.vector, plain[0].view.messages.vector + 1.0)
    assert defended[0].view.interactions is None
    np.testing.assert_array_equal(defended[0].truth.clicks, plain[0].truth.clicks)


def test_bad_probe_parameters_are_named(vali, model):
    with pytest.raises(FltrError, match="^queries_per_client: must be an integer >= 1, got 0$"):
        probe(alg(vali), model, vali, seed=0, queries_per_client=0)
    with pytest.raises(FltrError, match="^cohort_size: must be an integer >= 1, got 0$"):
        probe(alg(vali), model, vali, seed=0, cohort_size=0)
    with pytest.raises(FltrError, match="^passes: must be an integer >= 1, got 1.5$"):
        probe(alg(vali), model, vali, seed=0, passes=1.5)


def test_cohort_bounds_merge_a_too_small_last_cohort():
    """Brute force over small sizes: cohorts cover 0..n once, in order; every cohort but a merged
    last one has ``size`` clients; none is smaller than ``need`` unless it is the only one.
    Catches a merge that drops the remainder, or one that merges when it need not."""
    from fltr_audit.engine.probe import cohort_bounds

    for n in range(1, 30):
        for size in range(1, 8):
            for need in range(1, 4):
                bounds = cohort_bounds(n, size, need)
                assert [s for s, _ in bounds] == [0] + [e for _, e in bounds[:-1]] and bounds[-1][1] == n
                plain = [(s, min(s + size, n)) for s in range(0, n, size)]
                if len(plain) > 1 and plain[-1][1] - plain[-1][0] < need:
                    assert bounds == plain[:-2] + [(plain[-2][0], n)]
                else:
                    assert bounds == plain


def test_secagg_probe_never_makes_a_cohort_of_one(vali, model):
    """52 queries in cohorts of 3 under secure aggregation: the last client (52 = 17 * 3 + 1) joins
    the cohort before it, every query is probed, no cohort is lost. Without the merge the
    aggregator aborts the whole probe on its cohort of one."""
    from defenses.secagg import IdealSecAgg
    from fltr_audit.engine.probe import probe_cohorts

    found = probe_cohorts(alg(vali), model, vali, seed=1, cohort_size=3, aggregator=IdealSecAgg())
    sizes = [len(b.view.participants) for b in found.batches]
    assert sizes == [3] * 16 + [4] and found.cohorts_lost == 0 and found.queries_left_out == 0
    # B = 5 leaves one client of 2 queries that cannot join a cohort of 5-query clients
    found = probe_cohorts(alg(vali), model, vali, seed=1, cohort_size=2, queries_per_client=5,
                          aggregator=IdealSecAgg())
    assert found.queries_left_out == 2 and sum(len(b.view.participants) for b in found.batches) == 10


def test_dropouts_below_threshold_lose_that_cohort_only(vali, model):
    """IdealSecAgg(drop=0.6) in cohorts of 2: the cohorts lost are exactly those whose own
    aggregate stream drops a client (recomputed from ``stream(seed, "aggregate", r)``), the rest
    are aggregated. P(pass) = 1 for a correct count; a probe that aborts on the first loss or
    miscounts fails."""
    from defenses.secagg import IdealSecAgg
    from fltr_audit.engine.probe import probe_cohorts
    from fltr_audit.engine.randomness import stream

    found = probe_cohorts(alg(vali), model, vali, seed=4, cohort_size=2, aggregator=IdealSecAgg(drop=0.6))
    lost = [r for r in range(1, 27) if (stream(4, "aggregate", r).random(2) >= 0.6).sum() < 2]
    assert 0 < found.cohorts_lost == len(lost) and len(found.batches) == 26 - len(lost)
    assert [b.view.round for b in found.batches] == [r for r in range(1, 27) if r not in lost]


def test_probe_rounds_until_enough(vali, model):
    """Passes issue every query again by new clients with new round streams, and stop after the
    first pass after which ``enough`` holds (here: at least 100 lists, i.e. two passes of 52)."""
    from fltr_audit.engine.probe import probe_cohorts

    found = probe_cohorts(alg(vali), model, vali, seed=1, cohort_size=20, passes=5,
                          enough=lambda b: sum(x.view.n_clients if hasattr(x.view, "n_clients") else
                                               len(x.view.participants) for x in b) >= 100)
    queries = np.concatenate([b.view.interactions.queries[:, 0] for b in found.batches])
    np.testing.assert_array_equal(queries, np.r_[np.arange(52), np.arange(52)])
    ids = np.concatenate([b.truth.client_ids for b in found.batches])
    assert len(set(ids.tolist())) == 104
    assert [b.view.round for b in found.batches] == list(range(1, 7))
    one = probe_cohorts(alg(vali), model, vali, seed=1, cohort_size=20)
    assert not np.array_equal(one.batches[0].truth.clicks, found.batches[3].truth.clicks[:20])
    np.testing.assert_array_equal(one.batches[0].truth.clicks, found.batches[0].truth.clicks)
