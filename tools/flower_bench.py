"""Wall time per round of one federation: the engine, Flower's simulation runtime, a local Flower
deployment (SuperLink + one SuperNode per client on 127.0.0.1).

    python tools/flower_bench.py [--data ../shared/data/letor/MQ2008] [--algo fpdgd] [--clients 100]
                                 [--rounds 3] [--runtimes engine,simulation,deployment]
                                 [--deployment-clients 100] [--json out.json]

A round's time is measured by the server between its evaluations (``make_server_app``'s timed
curve lines; the engine: ``train``'s ``on_round`` callbacks), so start-up (Ray, the SuperLink and
SuperNodes, the processes' imports and data loading) is reported apart, as ``start_s`` (the whole
run's wall time minus its rounds). Round 1 includes the clients' first data loading and imports in
a deployment; the later rounds are the steady state. The deployment starts a SuperNode and a
ClientApp process per client (about 350 MB together, measured on this machine with 3 clients):
``--deployment-clients`` runs it at fewer clients when memory is short, and says so in the table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fltr_audit.errors import FltrError  # noqa: E402


def engine_rounds(setup) -> tuple[list[float], float]:
    """(seconds of each round, seconds of the whole call) of ``federation.train`` on ``setup``."""
    from threadpoolctl import threadpool_limits

    from fltr_audit.federation import train
    from fltr_audit.flower.engine_app import loaded

    start = time.perf_counter()
    splits, alg = loaded(setup)
    stamps = [time.perf_counter()]
    with threadpool_limits(limits=1):
        train(alg, splits.train, clients=setup.clients, queries_per_client=setup.queries_per_client,
              rounds=setup.rounds, seed=setup.seed, eval_data=getattr(splits, setup.eval_split),
              replace=setup.replace, on_round=lambda r, row: stamps.append(time.perf_counter()))
    return [b - a for a, b in zip(stamps, stamps[1:])], time.perf_counter() - start


def simulation_rounds(setup, work: Path) -> tuple[list[float], float]:
    from fltr_audit.flower.deployment import round_seconds
    from fltr_audit.flower.engine_app import simulate

    start = time.perf_counter()
    simulate(setup, curves_file=str(work / "curves.csv"))
    return round_seconds(work / "curves.csv"), time.perf_counter() - start


def deployment_rounds(setup, work: Path) -> tuple[list[float], float]:
    from fltr_audit.flower.deployment import round_seconds, run_local_deployment

    start = time.perf_counter()
    run_local_deployment(setup, work, timeout=3600)
    return round_seconds(work / "curves.csv"), time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data/letor/MQ2008")
    parser.add_argument("--algo", default="fpdgd", choices=("fpdgd", "foltr-es", "fedips"))
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--queries-per-client", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runtimes", default="engine,simulation,deployment")
    parser.add_argument("--deployment-clients", type=int, default=None, help="SuperNodes of the deployment "
                        "(default: --clients)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    from fltr_audit.algorithms.registry import algorithm_spec
    from fltr_audit.flower.engine_app import EngineSetup

    runtimes = args.runtimes.split(",")
    unknown = set(runtimes) - {"engine", "simulation", "deployment"}
    if unknown:
        print(f"--runtimes: unknown {sorted(unknown)}", file=sys.stderr)
        return 2
    rows = []
    for runtime in runtimes:
        clients = (args.deployment_clients or args.clients) if runtime == "deployment" else args.clients
        setup = EngineSetup(data=args.data, algo=args.algo, click_model=algorithm_spec(args.algo).train_click_model,
                            clients=clients, queries_per_client=args.queries_per_client, rounds=args.rounds,
                            seed=args.seed, replace=True)
        work = Path(tempfile.mkdtemp(prefix=f"flower-bench-{runtime}-"))
        try:
            measure = {"engine": lambda s, w: engine_rounds(s), "simulation": simulation_rounds,
                       "deployment": deployment_rounds}[runtime]
            rounds, total = measure(setup, work)
            shutil.rmtree(work, ignore_errors=True)
        except FltrError as exc:  # the work folder (logs) stays
            print(f"{runtime}: {exc}", file=sys.stderr)
            rounds, total = [], float("nan")
        later = rounds[1:] or rounds
        rows.append({"runtime": runtime, "algo": args.algo, "clients": clients, "rounds": len(rounds),
                     "round_1_s": rounds[0] if rounds else float("nan"),
                     "later_rounds_mean_s": sum(later) / len(later) if later else float("nan"),
                     "start_s": total - sum(rounds), "total_s": total})
        print(json.dumps(rows[-1]), flush=True)
    print(f"{'runtime':<11} {'clients':>7} {'round 1 s':>10} {'later rounds s':>15} {'start-up s':>11}")
    for r in rows:
        print(f"{r['runtime']:<11} {r['clients']:>7} {r['round_1_s']:>10.2f} {r['later_rounds_mean_s']:>15.2f} "
              f"{r['start_s']:>11.1f}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
