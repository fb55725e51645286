"""``fltr-audit flower run``: FPDGD, FOLtR-ES or FedIPS on Flower (simulation or a local deployment),
recorded for ``attack``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from fltr_audit.cli.app import flower_app
from fltr_audit.cli.common import atomic_out_dir, check_at_least, emit_json, parse_list
from fltr_audit.errors import FltrError
from fltr_audit.engine.interceptors import parse_rounds

RUNTIMES = ("simulation", "deployment")
LR_PARAMETER = {"fpdgd": "lr", "foltr-es": "lr", "fedips": "lr_local"}
"""The algorithm keyword ``--lr`` sets."""


@flower_app.command("run")
def run(
    data: str = typer.Option(..., "--data", help="Folder with Fold1..5, a LETOR file, or synthetic:PROFILE."),
    algo: str = typer.Option("fpdgd", "--algo", help="fpdgd | foltr-es | fedips."),
    fold: int = typer.Option(1, "--fold", help="Fold 1..5."),
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
    seed: int = typer.Option(0, "--seed", help="Run seed (the engine's: the same seed gives its curve)."),
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
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Run FPDGD, FOLtR-ES or FedIPS as a Flower ServerApp + ClientApp whose client step is the engine's,
    recording what the clients send and the server sees."""
    parse_list(algo, "--algo", tuple(LR_PARAMETER))
    parse_list(runtime, "--runtime", RUNTIMES)
    parse_list(server_sees, "--server-sees", ("messages", "aggregate"))
    check_at_least({"--clients": clients, "--queries-per-client": queries_per_client, "--rounds": rounds})
    if not timeout > 0:
        raise FltrError(f"--timeout: must be positive, got {timeout}")
    if supernodes is not None and not 1 <= supernodes <= clients:
        raise FltrError(f"--supernodes: {supernodes} is not in 1..{clients} (the clients)")
    keep = parse_rounds(record_rounds)
    kept = tuple(r for r in range(1, rounds + 1) if keep(r))
    if not kept:
        raise FltrError(f"--record-rounds: {record_rounds!r} keeps none of the {rounds} rounds")
    try:
        from fltr_audit.flower import deployment
        from fltr_audit.flower.engine_app import EngineSetup, default_strategy, recording_mod, recording_strategy, \
            simulate
    except ImportError:
        raise FltrError("flower: flwr is not installed (pip install 'fltr-audit[flower]')") from None
    from fltr_audit.engine.algorithms.registry import algorithm_spec

    if algo == "foltr-es" and server_sees == "aggregate":
        raise FltrError("--server-sees: aggregate records nothing of foltr-es messages (a seed and metric values "
                        "per client; there is no aggregate of them)")
    if superlink is not None:
        deployment.check_reachable(superlink)
    click_model = click_model or algorithm_spec(algo).train_click_model
    setup = EngineSetup(data=data, algo=algo, fold=fold, click_model=click_model, clients=clients,
                        queries_per_client=queries_per_client, rounds=rounds, seed=seed, replace=replace,
                        params=() if lr is None else ((LR_PARAMETER[algo], lr),))
    start = time.perf_counter()
    with atomic_out_dir(out) as tmp:
        rec = deployment.Recording(clients=tmp / "recording", server=tmp / "server-recording", sees=server_sees,
                                   rounds=kept)
        if superlink is not None:
            curves = deployment.run_on_superlink(setup, superlink, tmp / "flower", rec, timeout, supernodes)
        elif runtime == "deployment":
            curves = deployment.run_local_deployment(setup, tmp / "flower", rec, timeout, supernodes)
        else:
            (curves,) = simulate(setup, mods=[recording_mod(setup, str(rec.clients), set(kept))],
                                 strategy=lambda s: recording_strategy(s, default_strategy(s), str(rec.server),
                                                                       sees=server_sees, rounds=set(kept)))
        (tmp / "curves.csv").write_text("round,offline_ndcg10\n" + "".join(f"{r},{v!r}\n" for r, v in curves))
    seconds = time.perf_counter() - start
    result = {"out": str(out), "runtime": "superlink" if superlink else runtime, "rounds": rounds,
              "final_offline_ndcg10": curves[-1][1], "seconds": seconds, "seconds_per_round": seconds / rounds}
    if json_out:
        emit_json(result)
    else:
        typer.echo(f"{algo} on Flower ({result['runtime']}): offline nDCG@10 {curves[-1][1]:.4f} after {rounds} rounds "
                   f"in {seconds:.1f} s -> {out}")
