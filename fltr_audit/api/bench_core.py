"""Speed of the hot paths (``fltr-audit bench core``: CCM click simulation, nDCG@k over many
queries), of FPDGD's round against cohort size and list length (``bench scaling``) and the
memory-bandwidth limit of ``bench fpdgd`` beside FPDGD's own scoring of as many lists (``bench
bandwidth``). Measured, never asserted."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from fltr_audit.base.timing import best_seconds
from fltr_audit.constraints import POSITIVE_INT, Options, check
from fltr_audit.engine.algorithms.fpdgd import FPDGD, RANKING_PARTS_PER_THREAD
from fltr_audit.engine.clicks import CCM_NAMES, cascade_model
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.federation import run_round
from fltr_audit.engine.metrics import ndcg_at_k
from fltr_audit.engine.randomness import stream
from fltr_audit.engine.rankers import make_ranker
from fltr_audit.engine.schedule import sample_queries
from fltr_audit.engine.threads import row_parts, thread_map

TARGETS = {"ccm_clicks": 1.0, "ndcg10": 0.5}


def _queries(n_queries: int, mean_docs: int, n_levels: int, rng: np.random.Generator) -> Dataset:
    """Random labels (skewed to 0) for queries of 1..2*mean_docs-1 documents; one dummy feature."""
    counts = rng.integers(1, 2 * mean_docs, n_queries)
    n_docs = int(counts.sum())
    p = np.r_[0.6, np.full(n_levels - 1, 0.4 / (n_levels - 1))]
    return Dataset(
        features=np.zeros((n_docs, 1), np.float32),
        labels=rng.choice(n_levels, n_docs, p=p).astype(np.int8),
        query_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        qids=np.arange(n_queries, dtype=np.int64),
        n_levels=n_levels,
        name="bench",
    )


def bench_core(lists: int = 1_000_000, k: int = 10, queries: int = 100_000, docs: int = 40,
               click_model: str = "informational", levels: int = 5, repeats: int = 3, seed: int = 0) -> dict[str, Any]:
    """CCM click simulation and nDCG@k over many queries, best of ``repeats``."""
    for name, value in (("lists", lists), ("k", k), ("queries", queries), ("docs", docs), ("repeats", repeats)):
        check(name, value, POSITIVE_INT)
    check("click_model", click_model, (Options(CCM_NAMES),))
    model = cascade_model(click_model, levels)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, levels, (lists, k)).astype(np.int8)
    clicks_s = best_seconds(lambda: model.simulate(labels, rng), repeats)
    data = _queries(queries, docs, levels, rng)
    scores = rng.normal(size=data.n_docs)
    _ = data.padded_rows  # the padded layout is built once per data set and cached
    ndcg_s = best_seconds(lambda: ndcg_at_k(scores, data, k), repeats)
    rows = [
        {"task": "ccm_clicks", "what": f"{click_model} CCM, {lists:,} lists of {k}", "seconds": clicks_s,
         "target_seconds": TARGETS["ccm_clicks"] if (lists, k) == (1_000_000, 10) else None},
        {"task": "ndcg10" if k == 10 else f"ndcg{k}", "what": f"nDCG@{k}, {queries:,} queries, {data.n_docs:,} docs",
         "seconds": ndcg_s, "target_seconds": TARGETS["ndcg10"] if (queries, k) == (100_000, 10) else None},
    ]
    return {"repeats": repeats, "seed": seed, "results": rows}


def bench_scaling(data: str = "synthetic:mslr10k?queries=10000", cohorts: Sequence[int] = (250, 500, 1000, 2000),
                  lists: Sequence[int] = (5, 10, 20), rounds: int = 5, seed: int = 0) -> dict[str, Any]:
    """FPDGD round cost against cohort size and list length (CPU seconds per round and per
    interaction, B = 2): linear scaling shows as a flat cost per interaction along each axis."""
    sizes, ks = list(cohorts), list(lists)
    check("rounds", rounds, POSITIVE_INT)
    for name, values in (("cohorts", sizes), ("lists", ks)):
        for value in values:
            check(name, value, POSITIVE_INT)
    splits = load_splits(data, 1)
    train = splits.train
    rows = []
    for k in ks:
        for clients in sizes:
            alg = FPDGD(make_ranker("linear", train.n_features), cascade_model("perfect", train.n_levels), k=k)
            params = alg.init_params(stream(seed, "init"))
            cpu = 0.0
            for r in range(rounds + 1):
                queries = sample_queries(train.n_queries, clients, 2, stream(seed, "queries", r), replace=True)
                t = time.process_time()
                params, _, _, _ = run_round(alg, params, None, train, queries, np.arange(clients), r, seed)
                if r:
                    cpu += time.process_time() - t
            per_round = cpu / rounds
            rows.append({"k": k, "clients": clients, "cpu_seconds_per_round": per_round,
                         "cpu_microseconds_per_interaction": 1e6 * per_round / (2 * clients)})
    return {"data": data, "rounds": rounds, "results": rows}


def _product_seconds(X: np.ndarray, w: np.ndarray, threads: int, repeats: int) -> float:
    """Best wall seconds of ``X @ w`` (float32 BLAS ``sgemv``, one BLAS thread each) split into
    ``threads`` contiguous row parts computed at once: the time to stream X's bytes once."""
    bounds = [len(X) * i // threads for i in range(threads + 1)]
    parts = [X[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(threads) as pool:
        return best_seconds(lambda: list(pool.map(lambda part: part @ w, parts)), repeats)


def _scoring_seconds(train: Dataset, clients: int, queries_per_client: int, repeats: int) -> float:
    """Best wall seconds of one FPDGD round's scoring alone: B passes of ``clients`` lists of random
    queries (drawn as ``bench fpdgd`` draws them), each list's contiguous candidate rows scored under
    its own model by ``LinearRanker.score_blocks`` in the parts and threads of
    ``fpdgd.cohort_rankings`` -- that function without the Gumbel top-k it runs after the scoring."""
    ranker = make_ranker("linear", train.n_features)
    models = np.random.default_rng(0).normal(size=(clients, ranker.n_params))
    parts = row_parts(clients, per_thread=RANKING_PARTS_PER_THREAD)
    rounds = iter(range(repeats))

    def one_round() -> None:
        queries = sample_queries(train.n_queries, clients, queries_per_client, stream(0, "queries", next(rounds)),
                                 replace=clients * queries_per_client > train.n_queries)
        for b in range(queries_per_client):
            starts, counts = train.query_ptr[queries[:, b]], train.docs_per_query[queries[:, b]].astype(np.int64)

            def score_part(part: slice) -> None:
                ranker.score_blocks(models[part], train.features, starts[part], counts[part],
                                    out=np.empty((part.stop - part.start, int(counts[part].max(initial=1)))))

            thread_map(score_part, parts, rows=int(counts.sum()))

    return best_seconds(one_round, repeats)


def bench_bandwidth(data: str = "synthetic:mslr10k?queries=10000", fold: int = 1, clients: int = 1000,
                    queries_per_client: int = 2, repeats: int = 7) -> dict[str, Any]:
    """The memory-bandwidth limit of ``bench fpdgd``: the best of ``repeats`` float32 matrix-vector
    products over as many contiguous feature bytes as one FPDGD round ranks (clients x B lists of the
    mean candidate count; the whole split when it is smaller), on one core and on every core.
    ``interactions_per_second_limit``: clients x B interactions per the time every core takes to
    stream one round's bytes at that speed, FPDGD's speed if scoring were all it did and ran at
    that limit. ``interactions_per_second_scoring``: the same speed with FPDGD's own scoring of one
    round's lists (``_scoring_seconds``), which reads each list's rows where they lie."""
    for name, value in (("clients", clients), ("queries_per_client", queries_per_client), ("repeats", repeats)):
        check(name, value, POSITIVE_INT)
    train = load_splits(data, fold).train
    round_rows = clients * queries_per_client * train.n_docs / max(train.n_queries, 1)
    rows = max(1, min(train.n_docs, int(round(round_rows))))  # a split smaller than a round: all of it, scaled
    X = np.ascontiguousarray(train.features[:rows], dtype=np.float32)
    w = np.random.default_rng(0).normal(size=X.shape[1]).astype(np.float32)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    one, every = _product_seconds(X, w, 1, repeats), _product_seconds(X, w, cores, repeats)
    scoring = _scoring_seconds(train, clients, queries_per_client, repeats)
    return {"data": data, "rows": rows, "megabytes": X.nbytes / 1e6, "cores": cores,
            "seconds_one_core": one, "gb_per_second_one_core": X.nbytes / one / 1e9,
            "seconds_every_core": every, "gb_per_second_every_core": X.nbytes / every / 1e9,
            "interactions_per_second_limit": clients * queries_per_client / (every * round_rows / rows),
            "seconds_scoring": scoring, "interactions_per_second_scoring": clients * queries_per_client / scoring,
            "load_average": os.getloadavg()[0]}
