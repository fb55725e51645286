"""The probe protocol (Pham, Section 4.1)."""

from dataclasses import dataclass

import numpy as np
import pytest

from fltr_audit.algorithms.fpdgd import FPDGD
from fltr_audit.clicks import cascade_model
from fltr_audit.data.synthetic import fold_split, generate
from fltr_audit.errors import FltrError
from fltr_audit.interfaces import PrivacyClaim
from fltr_audit.probe import probe
from fltr_audit.rankers import LinearRanker


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


def test_bad_probe_options(vali, model):
    with pytest.raises(FltrError, match="--queries-per-client"):
        probe(alg(vali), model, vali, seed=0, queries_per_client=0)
    with pytest.raises(FltrError, match="--probe-cohort"):
        probe(alg(vali), model, vali, seed=0, cohort_size=0)
