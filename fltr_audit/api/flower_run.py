"""``fltr_audit.flower_run``: FPDGD, FOLtR-ES or FedIPS as a Flower ServerApp + ClientApp whose client
step is the engine's (simulation, a local deployment, or a running SuperLink), recording what the
clients send and the server sees -- ``fltr-audit flower run``. Needs the ``flower`` extra."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from fltr_audit.constraints import POSITIVE_INT, Interval, Options, check
from fltr_audit.engine.algorithms.registry import algorithm_spec
from fltr_audit.errors import FltrError
from fltr_audit.store.interceptors import parse_rounds
from fltr_audit.store.run_folder import atomic_out_dir

RUNTIMES = ("simulation", "deployment")
LR_PARAMETER = {"fpdgd": "lr", "foltr-es": "lr", "fedips": "lr_local"}
"""The algorithm keyword ``lr`` sets."""


def flower_run(algo: str = "fpdgd", *, data: str, out: str | Path, fold: int = 1, click_model: Optional[str] = None,
               clients: int = 3, supernodes: Optional[int] = None, queries_per_client: int = 4, rounds: int = 2,
               lr: Optional[float] = None, replace: bool = False, seed: int = 0, runtime: str = "simulation",
               superlink: Optional[str] = None, record_rounds: str = "1", server_sees: str = "messages",
               timeout: float = 900.0, flower_log: bool = True) -> dict:
    """Run the algorithm on Flower into ``out`` (``curves.csv``, ``recording/`` per client,
    ``server-recording/``); return its figures. ``flower_log``: False holds a simulation's Flower
    and Ray log back from stderr (errors still show; ``fltr_audit.flower.quiet``)."""
    check("algorithm", algo, (Options(tuple(LR_PARAMETER)),))
    check("runtime", runtime, (Options(RUNTIMES),))
    check("server_sees", server_sees, (Options(("messages", "aggregate")),))
    for name, value in (("clients", clients), ("queries_per_client", queries_per_client), ("rounds", rounds)):
        check(name, value, POSITIVE_INT)
    check("timeout", timeout, (Interval(float, 0, None, closed="neither"),))
    if supernodes is not None and not 1 <= supernodes <= clients:
        raise FltrError(f"--supernodes: {supernodes} is not in 1..{clients} (the clients)")
    keep = parse_rounds(record_rounds)
    kept = tuple(r for r in range(1, rounds + 1) if keep(r))
    if not kept:
        raise FltrError(f"--record-rounds: {record_rounds!r} keeps none of the {rounds} rounds")
    try:
        # optional extra: flwr (fltr-audit[flower])
        from fltr_audit.flower import deployment
        from fltr_audit.flower.engine_app import EngineSetup, default_strategy, recording_mod, recording_strategy, \
            simulate
    except ImportError:
        raise FltrError("flower: flwr is not installed (pip install 'fltr-audit[flower]')") from None
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
    out = Path(out)
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
                                                                       sees=server_sees, rounds=set(kept)),
                                 log=flower_log)
        (tmp / "curves.csv").write_text("round,offline_ndcg10\n" + "".join(f"{r},{v!r}\n" for r, v in curves))
    seconds = time.perf_counter() - start
    return {"out": str(out), "runtime": "superlink" if superlink else runtime, "rounds": rounds,
            "final_offline_ndcg10": curves[-1][1], "seconds": seconds, "seconds_per_round": seconds / rounds}
