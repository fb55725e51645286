"""``fltr-audit bench core`` and ``bench scaling`` (``fltr_audit.api.bench_core``), and ``bench
bandwidth``, the memory-bandwidth limit of ``bench fpdgd``."""

from __future__ import annotations

from typing import List

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import bench_app
from fltr_audit.cli.common import emit_json, print_figures, print_table


@bench_app.command("core")
def bench_core(
    lists: int = typer.Option(1_000_000, "--lists", help="Result lists for the CCM click simulation."),
    k: int = typer.Option(10, "--k", help="Length of each list and nDCG cut-off."),
    queries: int = typer.Option(100_000, "--queries", help="Queries for nDCG@k."),
    docs: int = typer.Option(40, "--docs", help="Mean documents per query for nDCG@k."),
    click_model: str = typer.Option("informational", "--click-model", help="CCM: perfect, navigational, informational."),
    levels: int = typer.Option(5, "--levels", help="Relevance levels (3 or 5)."),
    repeats: int = typer.Option(3, "--repeats", help="Timed repetitions; the best is reported."),
    seed: o.Seed = 0,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Time CCM click simulation and nDCG@k over many queries (best of --repeats)."""
    from fltr_audit.api.bench_core import bench_core as run  # start-up: the engine loads when the command runs

    result = run(lists, k, queries, docs, click_model, levels, repeats, seed)
    if json_out:
        emit_json(result)
        return
    print_table(f"bench core (best of {repeats})", [
        {"task": r["task"], "what": r["what"], "seconds": f"{r['seconds']:.3f}",
         "target": "" if r["target_seconds"] is None else f"< {r['target_seconds']:g} s"} for r in result["results"]])


@bench_app.command("scaling")
def bench_scaling(
    data: str = typer.Option("synthetic:mslr10k?queries=10000", "--data", help="Data spec (default: MSLR-sized)."),
    cohorts: List[int] = typer.Option([250, 500, 1000, 2000], "--cohorts",
                                      help="Cohort sizes (clients per round): repeat or comma-separate."),
    k: List[int] = typer.Option([5, 10, 20], "--k", help="Lengths k of the shown lists: repeat or comma-separate."),
    rounds: int = typer.Option(5, "--rounds", help="Timed rounds per cell (after one untimed round)."),
    seed: o.Seed = 0,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """FPDGD round cost against cohort size and list length (CPU seconds per round and per
    interaction, B = 2): linear scaling shows as a flat cost per interaction along each axis."""
    from fltr_audit.api.bench_core import bench_scaling as run  # start-up: the engine loads when the command runs

    result = run(data, cohorts, k, rounds, seed)
    if json_out:
        emit_json(result)
        return
    rows = result["results"]
    print_table(f"bench scaling ({data}, B = 2, CPU time, mean of {rounds} rounds)", [
        {"k": r["k"], "clients": r["clients"], "s / round": f"{r['cpu_seconds_per_round']:.4f}",
         "µs / interaction": f"{r['cpu_microseconds_per_interaction']:.1f}"} for r in rows])


@bench_app.command("bandwidth")
def bench_bandwidth(
    data: str = typer.Option("synthetic:mslr10k?queries=10000", "--data", help="Data spec (bench fpdgd's default)."),
    fold: int = typer.Option(1, "--fold"),
    clients: int = typer.Option(1000, "--clients"),
    queries_per_client: int = typer.Option(2, "--queries-per-client"),
    repeats: int = typer.Option(7, "--repeats", help="Timed repetitions; the best is reported."),
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """The memory-bandwidth limit of ``bench fpdgd``: a float32 matrix-vector product over as many
    feature bytes as one FPDGD round ranks (the mean candidate rows of clients x B lists: ~130 MB at
    the defaults), on one core and on every core. ``interactions_per_second_limit``: clients x B
    interactions per such pass on every core, the speed FPDGD would reach if scoring were all it did.
    ``interactions_per_second_scoring``: the same with FPDGD's own scoring of one round's lists (each
    list's rows read where they lie, in the training's threads), best of the repeats too."""
    from fltr_audit.api.bench_core import bench_bandwidth as run  # start-up: the engine loads when the command runs

    print_figures("bench bandwidth", run(data, fold, clients, queries_per_client, repeats), json_out)
