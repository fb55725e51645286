"""``bench bandwidth``'s scoring figure times one whole FPDGD round of scoring: every list of the
B passes, each the whole candidate block of a query, under its own client's model."""

from __future__ import annotations

import numpy as np
import pytest

from fltr_audit.api.bench_core import _scoring_seconds
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.rankers import LinearRanker


def test_scoring_round_scores_every_list_whole_under_its_clients_model(monkeypatch):
    train = load_splits("synthetic:mq2008?queries=60", 1).train
    calls = []
    real = LinearRanker.score_blocks

    def spy(self, params, X, starts, counts, out=None):
        calls.append((np.array(params), np.array(starts), np.array(counts)))
        return real(self, params, X, starts, counts, out=out)

    monkeypatch.setattr(LinearRanker, "score_blocks", spy)
    seconds = _scoring_seconds(train, clients=7, queries_per_client=3, repeats=2)
    assert seconds > 0
    models = np.concatenate([params for params, _, _ in calls])
    starts = np.concatenate([s for _, s, _ in calls])
    counts = np.concatenate([c for _, _, c in calls])
    assert len(starts) == 2 * 3 * 7  # every list of both repeats' B passes
    query = np.searchsorted(train.query_ptr, starts, side="right") - 1
    np.testing.assert_array_equal(starts, train.query_ptr[query])  # each block starts a query ...
    np.testing.assert_array_equal(counts, train.docs_per_query[query])  # ... and is all of it
    by_pass = models.reshape(6, 7, -1)  # pass after pass, the clients in order, each its own model
    assert len(np.unique(by_pass[0], axis=0)) == 7
    np.testing.assert_array_equal(by_pass, np.broadcast_to(by_pass[0], by_pass.shape))


def test_limit_is_one_rounds_bytes_at_the_measured_speed_when_the_split_is_smaller(monkeypatch):
    """The limit is a round's bytes at the measured speed: with streaming at 1 microsecond a row, a
    round of m lists of the mean candidate count reads m * (rows per list) rows, whatever m -- also
    when the split is smaller than a round and the product streams all of it instead."""
    import fltr_audit.api.bench_core as bench_core

    monkeypatch.setattr(bench_core, "_product_seconds", lambda X, w, threads, repeats: 1e-6 * len(X))
    monkeypatch.setattr(bench_core, "_scoring_seconds", lambda *args: 1.0)
    train = load_splits("synthetic:mq2008?queries=60", 1).train
    per_list = train.n_docs / train.n_queries
    small = bench_core.bench_bandwidth("synthetic:mq2008?queries=60", clients=4, queries_per_client=1, repeats=1)
    large = bench_core.bench_bandwidth("synthetic:mq2008?queries=60", clients=400, queries_per_client=5, repeats=1)
    assert small["rows"] < train.n_docs and large["rows"] == train.n_docs
    assert small["interactions_per_second_limit"] == pytest.approx(1e6 / per_list, rel=1e-9)
    assert large["interactions_per_second_limit"] == pytest.approx(1e6 / per_list, rel=1e-9)
