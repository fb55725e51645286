"""``fltr-audit bench fpdgd | foltr-es | fedips | data``: each algorithm's speed through the whole
federation path, and the data loader's (``fltr_audit.api.bench``)."""

from __future__ import annotations

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import bench_app
from fltr_audit.cli.common import emit_json, print_figures, print_table
from fltr_audit.cli.progress import progress


@bench_app.command("fpdgd")
def bench_fpdgd(
    data: str = typer.Option("synthetic:mslr10k?queries=10000", "--data", help="Data spec (default: MSLR-sized)."),
    fold: o.Fold = 1,
    clients: o.Clients = 1000,
    queries_per_client: o.QueriesPerClient = 2,
    rounds: o.Rounds = 200,
    click_model: str = typer.Option("perfect", "--click-model", help="perfect | navigational | informational."),
    seed: o.Seed = 0,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """FPDGD speed: interactions per second, wall time and peak RSS, offline eval on test every round.

    ``train_cpu_seconds`` (process CPU time) is less sensitive than the wall time to other
    work on a shared machine.
    """
    from fltr_audit.api.bench import bench_fpdgd as run  # start-up: the engine loads when the command runs

    with progress(rounds, "bench fpdgd", quiet or json_out, per_tenth=True) as bar:
        figures = run(data, fold, clients, queries_per_client, rounds, click_model, seed,
                      on_round=lambda r, row: bar.advance())
    print_figures("bench fpdgd", figures, json_out)


@bench_app.command("foltr-es")
def bench_foltr_es(
    data: str = typer.Option("synthetic:mq2007", "--data", help="Data spec (default: the MQ2007 profile)."),
    fold: o.Fold = 1,
    clients: o.Clients = 2000,
    queries_per_client: o.QueriesPerClient = 4,
    rounds: o.Rounds = 100,
    ranker: o.Ranker = "linear",
    click_model: str = typer.Option("perfect", "--click-model", help="perfect | navigational | informational."),
    seed: o.Seed = 0,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """FOLtR-ES speed through the whole federation path (no per-round evaluation)."""
    from fltr_audit.api.bench import bench_foltr_es as run  # start-up: the engine loads when the command runs

    with progress(rounds, "bench foltr-es", quiet or json_out, per_tenth=True) as bar:
        figures = run(data, fold, clients, queries_per_client, rounds, ranker, click_model, seed,
                      on_round=lambda r, row: bar.advance())
    print_figures("bench foltr-es", figures, json_out)


@bench_app.command("fedips")
def bench_fedips(
    data: str = typer.Option("synthetic:yahoo", "--data", help="Data spec (default: the yahoo profile, 700 features)."),
    fold: o.Fold = 1,
    clients: o.Clients = 2000,
    queries_per_client: o.QueriesPerClient = 5,
    rounds: o.Rounds = 100,
    k: int = typer.Option(5, "--k", help="K, documents shown per query."),
    clicks_per_client: int = typer.Option(10, "--clicks-per-client", help="m, clicks in a client's log per round."),
    gamma: float = typer.Option(1.0, "--gamma", help="Mean position bias."),
    seed: o.Seed = 0,
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """FedIPS speed: wall time of the training rounds (NDCG@5 on test evaluated only at the end)."""
    from fltr_audit.api.bench import bench_fedips as run  # start-up: the engine loads when the command runs

    with progress(rounds, "bench fedips", quiet or json_out, per_tenth=True) as bar:
        figures = run(data, fold, clients, queries_per_client, rounds, k, clicks_per_client, gamma, seed,
                      on_round=lambda r, row: bar.advance())
    print_figures("bench fedips", figures, json_out)


@bench_app.command("data")
def bench_data(
    queries: int = typer.Option(6000, "--queries", help="Queries of the synthetic mslr10k fold (6,000: ~720,000 "
                                                        "lines, an MSLR-WEB10K training fold)."),
    repeats: int = typer.Option(3, "--repeats", help="Timed repetitions of the cached load; the best is reported."),
    seed: o.Seed = 0,
    quiet: o.Quiet = False,
    json_out: o.Json = False,
) -> None:
    """Time the text load and the cached load of a synthetic MSLR-WEB10K-sized fold."""
    from fltr_audit.api.bench import bench_data as run  # start-up: the engine loads when the command runs

    with progress(3 + repeats, "bench data", quiet or json_out) as bar:
        figures = run(queries, repeats, seed, progress=bar)
    if json_out:
        emit_json({k: v for k, v in figures.items() if k != "what"})
        return
    print_table("bench data", [
        {"task": r["task"], "what": r["what"], "seconds": f"{r['seconds']:.3f}",
         "target": "" if r["target_seconds"] is None else f"<= {r['target_seconds']:g} s"} for r in figures["results"]])
    if not figures["identical"]:
        typer.echo("warning: the cached arrays differ from the generated ones", err=True)
