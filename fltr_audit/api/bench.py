"""Speed of the three algorithms through the whole federation path (``fltr-audit bench fpdgd |
foltr-es | fedips``): wall and CPU seconds of the timed rounds after one untimed warm-up round (the
compiled kernels load or compile there), interactions per second, peak RSS and the final figure
of merit (so a faster run can be checked to compute the same). Measured, never asserted in tests."""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from fltr_audit.api.train_fedips import load_fedips_splits, ndcg_evaluators
from fltr_audit.constraints import POSITIVE_INT, check
from fltr_audit.engine.algorithms.fedips import build_fedips
from fltr_audit.engine.algorithms.foltr_es import FOLtRES
from fltr_audit.engine.algorithms.fpdgd import FPDGD
from fltr_audit.engine.clicks import cascade_model
from fltr_audit.engine.data.cache import cached_read
from fltr_audit.engine.data.letor import read_letor
from fltr_audit.engine.data.letor_write import write_letor
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.data.synthetic import generate
from fltr_audit.engine.federation import TrainResult, train
from fltr_audit.engine.rankers import make_ranker
from fltr_audit.engine.training import TrainHooks, TrainSettings, check_budget
from fltr_audit.runs.progress import NO_PROGRESS, Progress

CACHED_LOAD_TARGET_SECONDS = 2.0

OnRound = Callable[[int, dict], None]


def _timed(run: Callable[[int, OnRound | None], TrainResult], rounds: int, on_round: OnRound | None
           ) -> tuple[float, float, TrainResult]:
    """(warm-up seconds, CPU seconds of the timed rounds, their result): one untimed round first."""
    start = time.perf_counter()
    run(1, None)
    warm_up = time.perf_counter() - start
    cpu = time.process_time()
    result = run(rounds, on_round)
    return warm_up, time.process_time() - cpu, result


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bench_fpdgd(data: str = "synthetic:mslr10k?queries=10000", fold: int = 1, clients: int = 1000,
                queries_per_client: int = 2, rounds: int = 200, click_model: str = "perfect", seed: int = 0,
                on_round: OnRound | None = None) -> dict[str, Any]:
    """FPDGD: interactions per second, wall time and peak RSS, offline eval on test every round
    (``train_cpu_seconds``, process CPU time, is less sensitive to other work on a shared machine)."""
    check_budget(clients, queries_per_client, rounds, 1)
    start = time.perf_counter()
    splits = load_splits(data, fold)
    load_seconds = time.perf_counter() - start
    alg = FPDGD(make_ranker("linear", splits.train.n_features), cascade_model(click_model, splits.train.n_levels))

    def run(n: int, report: OnRound | None) -> TrainResult:
        return train(alg, splits.train, TrainSettings(clients=clients, queries_per_client=queries_per_client,
                                                      rounds=n, seed=seed, eval_every=1),
                     eval_data=splits.test, hooks=TrainHooks(on_round=report))

    warm_up, cpu, res = _timed(run, rounds, on_round)
    return {
        "data": data, "train_queries": splits.train.n_queries, "train_docs": splits.train.n_docs,
        "test_queries": splits.test.n_queries, "clients": clients, "queries_per_client": queries_per_client,
        "rounds": rounds, "load_seconds": load_seconds, "warm_up_seconds": warm_up,
        "train_seconds": res.seconds, "train_cpu_seconds": cpu,
        "interactions": res.n_interactions, "interactions_per_second": res.n_interactions / res.seconds,
        "seconds_per_round": res.seconds / rounds, "peak_rss_mb": _peak_rss_mb(),
        "final_offline_ndcg10": float(res.curves["offline_ndcg10"].iloc[-1]), "target_seconds_200_rounds": 8.0,
    }


def bench_foltr_es(data: str = "synthetic:mq2007", fold: int = 1, clients: int = 2000, queries_per_client: int = 4,
                   rounds: int = 100, ranker: str = "linear", click_model: str = "perfect", seed: int = 0,
                   on_round: OnRound | None = None) -> dict[str, Any]:
    """FOLtR-ES speed through the whole federation path (no per-round evaluation)."""
    start = time.perf_counter()
    splits = load_splits(data, fold)
    load_seconds = time.perf_counter() - start
    alg = FOLtRES(make_ranker(ranker, splits.train.n_features), cascade_model(click_model, splits.train.n_levels))

    def run(n: int, report: OnRound | None) -> TrainResult:
        return train(alg, splits.train, TrainSettings(clients=clients, queries_per_client=queries_per_client,
                                                      rounds=n, seed=seed, replace=True),
                     hooks=TrainHooks(on_round=report))

    warm_up, _, res = _timed(run, rounds, on_round)
    return {
        "data": data, "ranker": ranker, "train_queries": splits.train.n_queries, "train_docs": splits.train.n_docs,
        "clients": clients, "queries_per_client": queries_per_client, "rounds": rounds,
        "load_seconds": load_seconds, "warm_up_seconds": warm_up, "train_seconds": res.seconds,
        "interactions": res.n_interactions,
        "interactions_per_second": res.n_interactions / res.seconds, "seconds_per_round": res.seconds / rounds,
        "peak_rss_mb": _peak_rss_mb(),
        "final_batch_maxrr": float(res.curves["batch_maxrr"].iloc[-1]), "target_interactions_per_second": 100_000,
    }


def bench_fedips(data: str = "synthetic:yahoo", fold: int = 1, clients: int = 2000, queries_per_client: int = 5,
                 rounds: int = 100, k: int = 5, clicks_per_client: int = 10, gamma: float = 1.0, seed: int = 0,
                 on_round: OnRound | None = None) -> dict[str, Any]:
    """FedIPS speed: wall time of the training rounds (NDCG@5 on test evaluated only at the end)."""
    start = time.perf_counter()
    splits = load_fedips_splits(data, fold, seed=seed)
    load_seconds = time.perf_counter() - start
    alg = build_fedips(splits.train, gamma=gamma, k=k, clicks_per_client=clicks_per_client, seed=seed,
                       clients=clients, queries_per_client=queries_per_client)
    replace = clients * queries_per_client > splits.train.n_queries

    def run(n: int, report: OnRound | None) -> TrainResult:
        return train(alg, splits.train, TrainSettings(clients=clients, queries_per_client=queries_per_client,
                                                      rounds=n, seed=seed, eval_every=n, replace=replace),
                     hooks=TrainHooks(evaluators=ndcg_evaluators(splits.test), on_round=report))

    warm_up, _, res = _timed(run, rounds, on_round)
    clicks = float(res.curves["clicks_per_client"].sum()) * clients
    return {
        "data": data, "n_features": splits.train.n_features, "train_queries": splits.train.n_queries,
        "clients": clients, "queries_per_client": queries_per_client, "k": k, "clicks_per_client": clicks_per_client,
        "rounds": rounds, "load_seconds": load_seconds, "logging_policy_seconds": alg.setup["logging_seconds"],
        "warm_up_seconds": warm_up, "train_seconds": res.seconds, "seconds_per_round": res.seconds / rounds,
        "clicks_per_second": clicks / res.seconds, "target_train_seconds": 30.0, "peak_rss_mb": _peak_rss_mb(),
        "final_ndcg5": float(res.curves["ndcg5"].iloc[-1]),
    }


def bench_data(queries: int = 6000, repeats: int = 3, seed: int = 0, progress: Progress = NO_PROGRESS) -> dict[str, Any]:
    """The text load and the cached load of a synthetic MSLR-WEB10K-sized fold (6,000 queries:
    ~720,000 lines, a training fold), the cached load the best of ``repeats``; 3 + repeats steps."""
    check("queries", queries, POSITIVE_INT)
    check("repeats", repeats, POSITIVE_INT)
    work = Path(tempfile.mkdtemp(prefix="fltr-bench-data-"))
    saved = os.environ.get("FLTR_AUDIT_CACHE")
    os.environ["FLTR_AUDIT_CACHE"] = str(work / "cache")
    try:
        ds = generate("mslr10k", queries, seed)
        path = work / "train.txt"
        write_letor(ds, path)
        progress.advance(description="text load")
        t = time.perf_counter()
        read_letor(path)
        text_s = time.perf_counter() - t
        progress.advance(description="first cached load (parse + store)")
        t = time.perf_counter()
        cached_read(path, read_letor)
        store_s = time.perf_counter() - t
        progress.advance(description="cached load")
        cached_s = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            again = cached_read(path, read_letor)
            cached_s = min(cached_s, time.perf_counter() - t)
            progress.advance()
        same = bool((again.features == ds.features).all() and (again.labels == ds.labels).all())
        size_mb = path.stat().st_size / 1e6
    finally:
        if saved is None:
            os.environ.pop("FLTR_AUDIT_CACHE", None)
        else:
            os.environ["FLTR_AUDIT_CACHE"] = saved
        shutil.rmtree(work, ignore_errors=True)
    what = (f"synthetic mslr10k, {ds.n_queries:,} queries, {ds.n_docs:,} lines x {ds.n_features} features, "
            f"{size_mb:,.0f} MB")
    rows = [
        {"task": "text_load", "what": what, "seconds": text_s, "target_seconds": None},
        {"task": "first_cached_load", "what": "parse + write the cache entry", "seconds": store_s,
         "target_seconds": None},
        {"task": "cached_load", "what": f"cache hit (best of {repeats})", "seconds": cached_s,
         "target_seconds": CACHED_LOAD_TARGET_SECONDS},
    ]
    return {"queries": ds.n_queries, "lines": ds.n_docs, "features": ds.n_features, "file_mb": size_mb,
            "identical": same, "what": what, "results": rows}
