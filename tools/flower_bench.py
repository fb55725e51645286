"""Wall time per round of one federation: the engine, Flower's simulation runtime, a local Flower
deployment (SuperLink + SuperNodes on 127.0.0.1), and the peak memory of each (this process and
every process it started, summed).

    python tools/flower_bench.py [--data ../shared/data/letor/MQ2008] [--algo fpdgd] [--clients 100]
                                 [--rounds 3] [--runtimes engine,simulation,deployment]
                                 [--supernodes 10] [--json out.json]

A round's time is measured by the server between its evaluations (``make_server_app``'s timed
curve lines; the engine: ``train``'s wall time over its rounds, whose evaluations run on a
background thread), so start-up (Ray, the SuperLink and
SuperNodes, the processes' imports and data loading) is reported apart, as ``start_s`` (the whole
run's wall time minus its rounds). Round 1 includes the clients' first data loading and imports in
a deployment; the later rounds are the steady state (in Flower 1.41 every train message starts a
ClientApp process of its own, so a later round costs as much as the first). A SuperNode with its
SuperExec takes about 265 MB and each running ClientApp about 170 MB: ``--supernodes`` (default:
one per client) serves the clients from fewer SuperNodes, each running several clients' messages
per round one after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fltr_audit.errors import FltrError  # noqa: E402
from fltr_audit.engine.training import TrainSettings  # noqa: E402


def process_stats() -> list[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every live process: field 1
    is the parent pid, 21 the resident pages (proc(5))."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out.append((int(entry.name), (entry / "stat").read_text().rsplit(")", 1)[1].split()))
            except (OSError, IndexError):
                continue
    return out


def tree_rss_mb(root: int) -> float:
    """Resident memory (MB) of ``root`` and all its descendants, read from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for pid, fields in process_stats():
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total * os.sysconf("SC_PAGE_SIZE") / 2**20


class PeakMemory:
    """The peak of ``tree_rss_mb(this process)``, sampled every ``every`` seconds while in the block."""

    def __init__(self, every: float = 0.5):
        self.every, self.peak_mb, self._done = every, 0.0, threading.Event()

    def _sample(self) -> None:
        while not self._done.is_set():
            self.peak_mb = max(self.peak_mb, tree_rss_mb(os.getpid()))
            self._done.wait(self.every)

    def __enter__(self) -> "PeakMemory":
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def engine_rounds(setup) -> tuple[list[float], float]:
    """(seconds of each round, seconds of the whole call) of ``federation.train`` on ``setup``."""
    from threadpoolctl import threadpool_limits

    from fltr_audit.engine.federation import train
    from fltr_audit.flower.engine_app import loaded

    start = time.perf_counter()
    splits, alg = loaded(setup)
    begin = time.perf_counter()
    with threadpool_limits(limits=1):
        train(alg, splits.train,
              TrainSettings(clients=setup.clients, queries_per_client=setup.queries_per_client, rounds=setup.rounds,
                            seed=setup.seed, replace=setup.replace),
              eval_data=getattr(splits, setup.eval_split))
    seconds = time.perf_counter() - begin  # each round's evaluation runs on a background thread: the mean
    return [seconds / setup.rounds] * setup.rounds, time.perf_counter() - start


def simulation_rounds(setup, work: Path) -> tuple[list[float], float]:
    from fltr_audit.flower.deployment import round_seconds
    from fltr_audit.flower.engine_app import simulate

    start = time.perf_counter()
    simulate(setup, curves_file=str(work / "curves.csv"))
    return round_seconds(work / "curves.csv"), time.perf_counter() - start


def deployment_rounds(setup, work: Path, nodes: int | None) -> tuple[list[float], float]:
    from fltr_audit.flower.deployment import round_seconds, run_local_deployment

    start = time.perf_counter()
    run_local_deployment(setup, work, timeout=3600, nodes=nodes)
    return round_seconds(work / "curves.csv"), time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data/letor/MQ2008")
    parser.add_argument("--algo", default="fpdgd", choices=("fpdgd", "foltr-es", "fedips"))
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--queries-per-client", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runtimes", default="engine,simulation,deployment")
    parser.add_argument("--supernodes", type=int, default=None, help="SuperNodes of the deployment "
                        "(default: --clients; fewer: each serves several clients per round)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    from fltr_audit.engine.algorithms.registry import algorithm_spec
    from fltr_audit.flower.engine_app import EngineSetup

    runtimes = args.runtimes.split(",")
    unknown = set(runtimes) - {"engine", "simulation", "deployment"}
    if unknown:
        print(f"--runtimes: unknown {sorted(unknown)}", file=sys.stderr)
        return 2
    rows = []
    for runtime in runtimes:
        nodes = (args.supernodes or args.clients) if runtime == "deployment" else None
        setup = EngineSetup(data=args.data, algo=args.algo, click_model=algorithm_spec(args.algo).train_click_model,
                            clients=args.clients, queries_per_client=args.queries_per_client, rounds=args.rounds,
                            seed=args.seed, replace=True)
        work = Path(tempfile.mkdtemp(prefix=f"flower-bench-{runtime}-"))
        try:
            measure = {"engine": lambda s, w: engine_rounds(s), "simulation": simulation_rounds,
                       "deployment": lambda s, w: deployment_rounds(s, w, nodes)}[runtime]
            with PeakMemory() as memory:
                rounds, total = measure(setup, work)
            shutil.rmtree(work, ignore_errors=True)
        except FltrError as exc:  # the work folder (logs) stays
            print(f"{runtime}: {exc}", file=sys.stderr)
            rounds, total = [], float("nan")
        later = rounds[1:] or rounds
        rows.append({"runtime": runtime, "algo": args.algo, "clients": args.clients, "supernodes": nodes,
                     "rounds": len(rounds), "peak_rss_mb": memory.peak_mb,
                     "load_average": os.getloadavg()[0],
                     "round_1_s": rounds[0] if rounds else float("nan"),
                     "later_rounds_mean_s": sum(later) / len(later) if later else float("nan"),
                     "start_s": total - sum(rounds), "total_s": total})
        print(json.dumps(rows[-1]), flush=True)
    print(f"{'runtime':<11} {'clients':>7} {'SuperNodes':>10} {'round 1 s':>10} {'later rounds s':>15} "
          f"{'start-up s':>11} {'peak MB':>8} {'load':>5}")
    for r in rows:
        print(f"{r['runtime']:<11} {r['clients']:>7} {r['supernodes'] or '':>10} {r['round_1_s']:>10.2f} "
              f"{r['later_rounds_mean_s']:>15.2f} {r['start_s']:>11.1f} {r['peak_rss_mb']:>8.0f} "
              f"{r['load_average']:>5.1f}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
