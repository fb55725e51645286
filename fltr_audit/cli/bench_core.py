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
