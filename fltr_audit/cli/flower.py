"""``fltr-audit flower run``: FPDGD, FOLtR-ES or FedIPS on Flower (simulation or a local deployment),
recorded for ``attack`` (``fltr_audit.api.flower_run``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from fltr_audit.cli import options as o
from fltr_audit.cli.app import flower_app
from fltr_audit.cli.common import emit_json
from fltr_audit.cli.progress import progress


@flower_app.command("run")
def run(
    algorithm: str = typer.Argument("fpdgd", help="fpdgd | foltr-es | fedips.", metavar="[ALGORITHM]"),
    data: o.Data = ...,
    fold: o.Fold = 1,
    click_model: Optional[str] = typer.Option(None, "--click-model",
                                              help="perfect | navigational | informational (fpdgd, foltr-es), "
                                                   "pbm (fedips); default: the algorithm's."),
    clients: int = typer.Option(3, "--clients", help="Clients, one train message each per round."),
    supernodes: Optional[int] = typer.Option(None, "--supernodes",
                                             help="SuperNodes of a deployment (default: --clients); fewer: each "
                                                  "serves several clients' messages per round."),
    queries_per_client: int = typer.Option(4, "--queries-per-client", help="B, queries per client per round."),
    rounds: int = typer.Option(2, "--rounds", help="Global rounds."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate: PDGD's eta (fpdgd), Adam's (foltr-es), "
                                                           "the local one (fedips); default: the algorithm's."),
    replace: bool = typer.Option(False, "--replace", help="Draw each round's queries with replacement."),
    seed: o.Seed = 0,
    runtime: str = typer.Option("simulation", "--runtime", help="simulation (Ray) | deployment (SuperLink + "
                                                                 "SuperNodes on 127.0.0.1)."),
    superlink: Optional[str] = typer.Option(None, "--superlink",
                                            help="HOST:PORT of a running SuperLink (with --supernodes SuperNodes "
                                                 "connected) to submit to instead."),
    record_rounds: str = typer.Option("1", "--record-rounds", help="Rounds to record: 1,5 or every:K."),
    server_sees: str = typer.Option("messages", "--server-sees", help="messages | aggregate (what the server-side "
                                                                       "recorder keeps)."),
    timeout: float = typer.Option(900.0, "--timeout", help="Seconds before the run is abandoned."),
    out: Path = typer.Option(..., "--out", help="Output folder: curves.csv, recording/ (per client), "
                                                "server-recording/."),
    json_out: o.Json = False,
    quiet: o.Quiet = False,
) -> None:
    """Run FPDGD, FOLtR-ES or FedIPS as a Flower ServerApp + ClientApp whose client step is the engine's,
    recording what the clients send and the server sees."""
    from fltr_audit.api.flower_run import flower_run  # start-up: the engine loads when the command runs

    with progress(1, f"{algorithm} on Flower ({runtime})", quiet or json_out) as bar:
        result = flower_run(algorithm, data=data, out=out, fold=fold, click_model=click_model, clients=clients,
                            supernodes=supernodes, queries_per_client=queries_per_client, rounds=rounds, lr=lr,
                            replace=replace, seed=seed, runtime=runtime, superlink=superlink,
                            record_rounds=record_rounds, server_sees=server_sees, timeout=timeout,
                            flower_log=not (quiet or json_out))
        bar.advance()
    if json_out:
        emit_json(result)
    else:
        typer.echo(f"{algorithm} on Flower ({result['runtime']}): offline nDCG@10 {result['final_offline_ndcg10']:.4f} "
                   f"after {rounds} rounds in {result['seconds']:.1f} s -> {out}")
