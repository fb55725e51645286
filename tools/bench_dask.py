"""Scale-out of a campaign: the same grid serially, on a local process pool, on a Dask
``LocalCluster`` of worker processes, and on ``dask scheduler`` / ``dask worker`` processes on
127.0.0.1 -- wall time, speed-up against serial, and whether every result table is identical.

    python tools/bench_dask.py                 # 50 runs (25 seeds x 2 defenses), 2 workers
    python tools/bench_dask.py --seeds 50 --workers 2 --rounds 10

Run it on an idle machine: a speed-up needs free cores (on a 2-core machine shared with other
work the parallel executors only time-share the same cores). What it controls so that the
executors compare fairly:

* every worker is a process with one thread (``--nthreads 1`` / ``threads_per_worker=1``), and
  every run computes with single-threaded BLAS (``executors.execute_run``), so W workers use W
  cores -- no oversubscription by BLAS or by the engine's own thread pool (one thread inside a
  worker process, ``threads.thread_count``);
* the Dask workers import the engine before the clock starts (a worker's first import costs
  seconds, paid once per worker process, not per run), so their figures are the per-run costs;
  the process pool is started by the campaign itself (``campaign run --workers W``), so its
  figure includes spawning W interpreters that each import the engine and load the compiled
  kernels (about 2 s on the 2-core machine), as a user's campaign pays -- on a grid of short
  runs that start-up is most of its wall time;
* the synthetic data set is generated once into the on-disk cache before the clock starts.

Prints one table; ``--json`` prints the rows as JSON. ``runs in flight`` (the runs' own seconds over
the wall time) tells an executor's overhead from a busy machine: near the worker count the workers
were kept busy and a missing speed-up comes from the runs themselves running slower (other load);
well below it, the time went to the executor (start-up, scheduling, storing results). Every scheduler and worker process it
starts is stopped by its pid.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

GRID = """
name = "dask-bench"
seeds = {seeds}

[data]
spec = ["{data}"]

[algorithm]
name = "fpdgd"
rounds = [{rounds}]
clients = [{clients}]
queries_per_client = [2]

[probe]
click_models = ["perfect"]
cohort = [8]
min_shown = 5

[audit]
defenses = ["none", "secagg"]
attacks = ["olsr", "random3"]
trials = 200
"""


def _tables(path: Path) -> dict:
    """Every result table of a store without its timing columns, sorted (as the executor test does)."""
    from fltr_audit.store.results import load

    tables = load(path)
    out = {}
    for name in ("attacks", "utility", "curves", "audits"):
        frame = tables[name].drop(columns=[c for c in ("seconds", "finished_at") if c in tables[name]])
        out[name] = frame.sort_values(list(frame.columns[:4])).reset_index(drop=True)
    return out


def _same(a: dict, b: dict) -> bool:
    return all(a[k].shape == b[k].shape and a[k].equals(b[k]) for k in a)


def _run_seconds(path: Path) -> float:
    """Sum of the runs' own compute seconds (recorded by each run)."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        return float(conn.execute("SELECT SUM(seconds) FROM runs WHERE status = 'done'").fetchone()[0] or 0.0)


def _timed(spec: dict, store_path: Path, **where) -> float:
    from fltr_audit.runs.campaign import run_campaign
    from fltr_audit.store.results import ResultsStore

    start = time.perf_counter()
    counts = run_campaign(spec, ResultsStore(store_path), **where)
    seconds = time.perf_counter() - start
    if counts["failed"] or not counts["done"]:
        raise SystemExit(f"bench_dask: runs failed under {where}: {counts}")
    return seconds


def _engine_threads() -> int:
    import fltr_audit.runs.audit  # noqa: F401  (the engine, imported once per worker process)
    from fltr_audit.engine.threads import thread_count

    return thread_count()


def _warm(client) -> None:
    """Import the engine in every worker before timing and check each worker computes on one thread."""
    threads = client.run(_engine_threads)
    if set(threads.values()) != {1}:
        raise SystemExit(f"bench_dask: engine threads per worker {threads}, expected 1 (oversubscribed cores)")


def _local_cluster(spec: dict, store_path: Path, workers: int) -> float:
    import distributed

    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(workers, timeout=300)
        _warm(client)
        return _timed(spec, store_path, scheduler=cluster.scheduler_address)


def _scheduler_processes(spec: dict, store_path: Path, workers: int, tmp: Path) -> float:
    import distributed

    dask = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")
    if dask is None:
        raise SystemExit("bench_dask: the dask command is not installed (pip install 'fltr-audit[dask]')")
    scheduler_file = tmp / "scheduler.json"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(scheduler_file)], env=env, **quiet)]
    try:
        deadline = time.monotonic() + 120
        while not (scheduler_file.exists() and scheduler_file.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        procs.append(subprocess.Popen([dask, "worker", "--scheduler-file", str(scheduler_file), "--nworkers",
                                       str(workers), "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"],
                                      env=env, **quiet))
        with distributed.Client(address, timeout=120) as client:
            client.wait_for_workers(workers, timeout=300)
            _warm(client)
        return _timed(spec, store_path, scheduler=address)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=25, help="Seeds; the grid has 2 runs per seed (default 25: 50 runs).")
    parser.add_argument("--workers", type=int, default=2, help="Worker processes of each parallel executor.")
    parser.add_argument("--data", default="synthetic:mq2008?queries=150")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--skip", default="", help="Comma-separated executors to skip: pool, local-cluster, scheduler.")
    parser.add_argument("--json", action="store_true", help="Print the rows as JSON.")
    args = parser.parse_args(argv)
    from fltr_audit.spec.campaign import load_spec
    from fltr_audit.engine.data.load import load_splits

    skip = {s for s in args.skip.split(",") if s}
    load_avg_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fltr-audit-bench-dask-") as tmp_name:
        tmp = Path(tmp_name)
        grid = tmp / "grid.toml"
        grid.write_text(textwrap.dedent(GRID.format(seeds=list(range(args.seeds)), data=args.data,
                                                    rounds=args.rounds, clients=args.clients)))
        spec = load_spec(grid)
        load_splits(args.data, 1)  # generated once (cached) before any clock starts
        executors = [("serial", lambda p: _timed(spec, p, workers=1))]
        if "pool" not in skip:
            executors.append((f"process pool ({args.workers})", lambda p: _timed(spec, p, workers=args.workers)))
        if "local-cluster" not in skip:
            executors.append((f"dask LocalCluster ({args.workers} processes)",
                              lambda p: _local_cluster(spec, p, args.workers)))
        if "scheduler" not in skip:
            executors.append((f"dask scheduler + {args.workers} dask workers (127.0.0.1)",
                              lambda p: _scheduler_processes(spec, p, args.workers, tmp)))
        rows, reference = [], None
        for i, (name, run) in enumerate(executors):
            store = tmp / f"store{i}.sqlite"
            wall = run(store)
            tables = _tables(store)
            reference = reference if reference is not None else (tables, wall)
            rows.append({"executor": name, "runs": len(tables["utility"]), "wall_seconds": round(wall, 2),
                         "run_seconds_sum": round(_run_seconds(store), 2),
                         "runs_in_flight": round(_run_seconds(store) / wall, 2),
                         "speed_up": round(reference[1] / wall, 2), "identical_to_serial": _same(reference[0], tables)})
    meta = {"cores": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_avg_start],
            "load_average_after": [round(x, 2) for x in os.getloadavg()], "data": args.data, "rounds": args.rounds,
            "clients": args.clients}
    if args.json:
        print(json.dumps({**meta, "results": rows}, indent=2))
    else:
        print(f"bench dask: {meta}")
        for r in rows:
            print(f"  {r['executor']:<48} {r['runs']:>4} runs  {r['wall_seconds']:>8.2f} s wall  "
                  f"{r['run_seconds_sum']:>8.2f} s in runs  {r['runs_in_flight']:>5.2f} in flight  x{r['speed_up']:<5}  identical: {r['identical_to_serial']}")
    return 0 if all(r["identical_to_serial"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
