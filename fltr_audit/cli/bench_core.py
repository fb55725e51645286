"""``fltr-audit bench core``: speed of the click simulation and nDCG hot paths."""

from __future__ import annotations

import numpy as np
import typer

from fltr_audit.cli.app import bench_app
from fltr_audit.cli.common import best_seconds, check_at_least, emit_json, print_table
from fltr_audit.engine.clicks import CCM_NAMES, cascade_model
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.errors import FltrError
from fltr_audit.engine.metrics import ndcg_at_k

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


@bench_app.command("core")
def bench_core(
    lists: int = typer.Option(1_000_000, help="Result lists for the CCM click simulation."),
    k: int = typer.Option(10, help="Length of each list and nDCG cut-off."),
    queries: int = typer.Option(100_000, help="Queries for nDCG@k."),
    docs: int = typer.Option(40, help="Mean documents per query for nDCG@k."),
    click_model: str = typer.Option("informational", "--click-model", help="CCM: perfect, navigational, informational."),
    levels: int = typer.Option(5, help="Relevance levels (3 or 5)."),
    repeats: int = typer.Option(3, help="Timed repetitions; the best is reported."),
    seed: int = typer.Option(0, help="Seed of the random labels, scores and clicks."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Time CCM click simulation and nDCG@k over many queries (best of --repeats)."""
    check_at_least({"--lists": lists, "--k": k, "--queries": queries, "--docs": docs, "--repeats": repeats})
    if click_model not in CCM_NAMES:
        raise FltrError(f"--click-model: unknown click model {click_model!r} (choose from {', '.join(CCM_NAMES)})")
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
    if json_out:
        emit_json({"repeats": repeats, "seed": seed, "results": rows})
        return
    print_table(f"bench core (best of {repeats})", [
        {"task": r["task"], "what": r["what"], "seconds": f"{r['seconds']:.3f}",
         "target": "" if r["target_seconds"] is None else f"< {r['target_seconds']:g} s"} for r in rows])


@bench_app.command("scaling")
def bench_scaling(
    data: str = typer.Option("synthetic:mslr10k?queries=10000", "--data", help="Data spec (default: MSLR-sized)."),
    cohorts: str = typer.Option("250,500,1000,2000", "--cohorts", help="Cohort sizes (clients per round)."),
    lists: str = typer.Option("5,10,20", "--lists", help="Lengths k of the shown lists."),
    rounds: int = typer.Option(5, "--rounds", help="Timed rounds per cell (after one untimed round)."),
    seed: int = typer.Option(0, "--seed"),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """FPDGD round cost against cohort size and list length (CPU seconds per round and per
    interaction, B = 2): linear scaling shows as a flat cost per interaction along each axis."""
    import time

    from fltr_audit.engine.algorithms.fpdgd import FPDGD
    from fltr_audit.cli.common import parse_list
    from fltr_audit.engine.data.load import load_splits
    from fltr_audit.engine.federation import run_round
    from fltr_audit.engine.schedule import sample_queries
    from fltr_audit.engine.randomness import stream
    from fltr_audit.engine.rankers import make_ranker

    sizes = [int(v) for v in parse_list(cohorts, "--cohorts")]
    ks = [int(v) for v in parse_list(lists, "--lists")]
    check_at_least({"--rounds": rounds, **{"--cohorts": min(sizes), "--lists": min(ks)}})
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
    if json_out:
        emit_json({"data": data, "rounds": rounds, "results": rows})
        return
    print_table(f"bench scaling ({data}, B = 2, CPU time, mean of {rounds} rounds)", [
        {"k": r["k"], "clients": r["clients"], "s / round": f"{r['cpu_seconds_per_round']:.4f}",
         "µs / interaction": f"{r['cpu_microseconds_per_interaction']:.1f}"} for r in rows])


def _product_seconds(X: np.ndarray, w: np.ndarray, threads: int, repeats: int) -> float:
    """Best wall seconds of ``X @ w`` (float32 BLAS ``sgemv``, one BLAS thread each) split into
    ``threads`` contiguous row parts computed at once: the time to stream X's bytes once."""
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    bounds = np.linspace(0, len(X), threads + 1).astype(np.int64)
    parts = [X[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(threads) as pool:
        return best_seconds(lambda: list(pool.map(lambda part: part @ w, parts)), repeats)


@bench_app.command("bandwidth")
def bench_bandwidth(
    data: str = typer.Option("synthetic:mslr10k?queries=10000", "--data", help="Data spec (bench fpdgd's default)."),
    fold: int = typer.Option(1, "--fold"),
    clients: int = typer.Option(1000, "--clients"),
    queries_per_client: int = typer.Option(2, "--queries-per-client"),
    repeats: int = typer.Option(7, "--repeats", help="Timed repetitions; the best is reported."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """The memory-bandwidth limit of ``bench fpdgd``: a float32 matrix-vector product over as many
    feature bytes as one FPDGD round ranks (the mean candidate rows of clients x B lists: ~130 MB at
    the defaults), on one core and on every core. ``interactions_per_second_limit``: clients x B
    interactions per such pass on every core, the speed FPDGD would reach if scoring were all it did."""
    import os

    from fltr_audit.cli.common import print_figures
    from fltr_audit.engine.data.load import load_splits

    check_at_least({"--clients": clients, "--queries-per-client": queries_per_client, "--repeats": repeats})
    train = load_splits(data, fold).train
    rows = min(train.n_docs, int(round(clients * queries_per_client * train.n_docs / max(train.n_queries, 1))))
    X = np.ascontiguousarray(train.features[:rows], dtype=np.float32)
    w = np.random.default_rng(0).normal(size=X.shape[1]).astype(np.float32)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    one, every = _product_seconds(X, w, 1, repeats), _product_seconds(X, w, cores, repeats)
    figures = {"data": data, "rows": rows, "megabytes": X.nbytes / 1e6, "cores": cores,
               "seconds_one_core": one, "gb_per_second_one_core": X.nbytes / one / 1e9,
               "seconds_every_core": every, "gb_per_second_every_core": X.nbytes / every / 1e9,
               "interactions_per_second_limit": clients * queries_per_client / every,
               "load_average": os.getloadavg()[0]}
    print_figures("bench bandwidth", figures, json_out)
