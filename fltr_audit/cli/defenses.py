"""``fltr-audit defenses list`` and ``fltr-audit bench defenses``."""

from __future__ import annotations

import time

import numpy as np
import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import bench_app, defenses_app
from fltr_audit.cli.progress import progress
from fltr_audit.cli.common import best_seconds, check_at_least, emit_json, print_table
from fltr_audit.constraints import Interval, check
from fltr_audit.errors import FltrError
from fltr_audit.engine.aggregation import RoundDefenses

SECAGG_TARGET_SECONDS = 5.0
IDEAL_OVERHEAD_TARGET = 0.05


@defenses_app.command("list")
def list_command(json_out: o.Json = False) -> None:
    """Every defense (built-in, registered and installed plug-ins, with their distribution) with its
    parameters, defaults and claimed guarantee."""
    from fltr_audit.api.listing import defense_rows  # start-up: the catalog loads when the command runs

    rows = defense_rows()
    if json_out:
        emit_json(rows)
        return
    print_table("Defenses (combine with '+', e.g. clip(sensitivity=5)+dp-distributed(eps=4.5)+secagg)", [
        {"name": row["name"] + (f" [{row['distribution']}]" if row["distribution"] else ""), "role": row["role"],
         "parameters (default)": ", ".join(f"{p['name']}={p['default']}" for p in row["parameters"]),
         "claimed guarantee": row["guarantee"]} for row in rows], min_width=120)


def _training_rounds(aggregators: list, clients: int, repeats: int, seed: int) -> list[float]:
    """Best wall time of one FPDGD round (synthetic mslr10k profile, 136 features, B = 4) with
    each aggregator, the aggregators interleaved so that machine load hits them alike."""
    from fltr_audit.engine.algorithms.fpdgd import FPDGD
    from fltr_audit.engine.clicks import cascade_model
    from fltr_audit.engine.data.synthetic import generate
    from fltr_audit.engine.federation import run_round
    from fltr_audit.engine.schedule import sample_queries
    from fltr_audit.engine.randomness import stream
    from fltr_audit.engine.rankers import LinearRanker

    data = generate("mslr10k", queries=max(500, 4 * clients), seed=seed)
    algo = FPDGD(LinearRanker(data.n_features), cascade_model("informational", data.n_levels))
    params = algo.init_params(stream(seed, "init"))
    queries = sample_queries(data.n_queries, clients, 4, stream(seed, "queries", 1))
    ids = np.arange(clients)
    best = [float("inf")] * len(aggregators)
    for _ in range(repeats):
        for i, agg in enumerate(aggregators):
            best[i] = min(best[i],
                          best_seconds(lambda: run_round(algo, params, None, data, queries, ids, 1, seed,
                                                         defenses=RoundDefenses(aggregator=agg)),
                                       1))
    return best


@bench_app.command("defenses")
def bench_defenses(
    clients: int = typer.Option(1000, help="Cohort size of the secure-aggregation runs."),
    dim: int = typer.Option(136, help="Vector dimension (the linear ranker on MSLR-WEB10K: 136)."),
    degree: int = typer.Option(20, help="Neighbour degree of the SecAgg+ run (even)."),
    drop: float = typer.Option(0.0, help="Dropout rate after key exchange."),
    full: bool = typer.Option(True, "--full/--no-full", help="Also time the complete graph (slow: ~n^2/2 key agreements)."),
    round_clients: int = typer.Option(100, help="Cohort size of the timed FPDGD training round."),
    repeats: int = typer.Option(5, help="Timed repetitions of the fast measurements; the best is reported."),
    seed: int = typer.Option(0, help="Seed of the synthetic vectors, dropouts and data."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Time secure aggregation: the protocol (SecAgg+ degree and complete graph) per round, and
    the ideal mode's overhead over plain FedAvg, alone and within an FPDGD training round."""
    from defenses.secagg import IdealSecAgg
    from defenses.secagg_protocol import SecAggProtocol
    from fltr_audit.engine.aggregation import FedAvg
    from fltr_audit.engine.messages import Messages

    check_at_least({"--clients": clients}, 3)
    check_at_least({"--dim": dim, "--round-clients": round_clients, "--repeats": repeats})
    if degree < 2 or degree % 2 or degree >= clients - 1:
        raise FltrError(f"--degree: must be even, at least 2 and below --clients - 1, got {degree}")
    check("--drop", drop, (Interval(float, 0, 1, "left"),))
    rng = np.random.default_rng(seed)
    messages = Messages(n_interactions=np.full(clients, 4), vector=rng.normal(0, 1, (clients, dim)))
    ids = np.arange(clients)
    runs = [(f"secagg-protocol k={degree}", SecAggProtocol(drop=drop, k=degree))]
    if full:
        runs.append(("secagg-protocol complete", SecAggProtocol(drop=drop, k=0)))
    rows = []
    with progress(len(runs) + 2, "bench defenses", quiet) as bar:
        for label, agg in runs:
            start, cpu = time.perf_counter(), time.process_time()
            out = agg.aggregate(messages, ids, np.random.default_rng(seed))
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            rows.append({"measure": label, "clients": clients, "dim": dim, "seconds": seconds, "cpu_seconds": cpu,
                         "target_seconds": SECAGG_TARGET_SECONDS if agg.k else None,
                         "key_agreements": out.stats["key_agreements"],
                         "mask_key_agreements": out.stats["mask_key_agreements"],
                         "mb_up": out.stats["bytes_up"] / 1e6, "mb_down": out.stats["bytes_down"] / 1e6,
                         "dropouts": out.stats["dropouts"], "threshold": out.stats["threshold"]})
            bar.advance()
        plain = best_seconds(lambda: FedAvg().aggregate(messages, ids, np.random.default_rng(seed)), repeats * 20)
        ideal = best_seconds(lambda: IdealSecAgg().aggregate(messages, ids, np.random.default_rng(seed)), repeats * 20)
        rows.append({"measure": "aggregate: secagg vs plain", "clients": clients, "dim": dim,
                     "seconds": ideal, "baseline_seconds": plain, "overhead_seconds": ideal - plain})
        bar.advance()
        round_plain, round_ideal = _training_rounds([FedAvg(), IdealSecAgg()], round_clients, repeats, seed)
        rows.append({"measure": "FPDGD round: secagg vs plain", "clients": round_clients, "dim": 136,
                     "seconds": round_ideal, "baseline_seconds": round_plain,
                     "overhead_fraction": (round_ideal - round_plain) / round_plain,
                     "aggregation_overhead_fraction": (ideal - plain) / round_plain,
                     "target_fraction": IDEAL_OVERHEAD_TARGET})
        bar.advance()
    if json_out:
        emit_json(rows)
        return
    print_table("bench defenses (seconds per round; best of --repeats for the fast rows)",
                [_shown_row(r) for r in rows], min_width=120)


def _shown_row(r: dict) -> dict:
    """One row of ``bench defenses`` as the table shows it."""
    note = ""
    if "cpu_seconds" in r:
        note = f"CPU {r['cpu_seconds']:.3g} s"
        if r["target_seconds"]:
            note += f"; target <= {r['target_seconds']:g} s"
    if "aggregation_overhead_fraction" in r:
        note = (f"round {100 * r['overhead_fraction']:+.1f} %; aggregation alone "
                f"{100 * r['aggregation_overhead_fraction']:+.2f} % of a round (target < 5 %)")
    return {"measure": r["measure"], "clients": str(r["clients"]), "seconds": f"{r['seconds']:.4g}",
            "baseline": f"{r['baseline_seconds']:.4g}" if "baseline_seconds" in r else "",
            "key agreements": str(r.get("key_agreements", "")),
            "MB up/down": f"{r['mb_up']:.1f} / {r['mb_down']:.1f}" if "mb_up" in r else "", "note": note}
