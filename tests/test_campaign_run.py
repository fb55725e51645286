"""Running campaigns: resume after a killed worker, identical results whatever the executor."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing

import pandas as pd
import pytest

from fltr_audit.runs.campaign import run_campaign

from fltr_audit.runs.executors import Executor

from fltr_audit.spec.campaign import load_spec

from fltr_audit.spec.grid import expand
from fltr_audit.store.results import ResultsStore, load

TINY = """
name = "tiny"
seeds = [0, 1]

[data]
spec = ["synthetic:mq2008?queries=60"]

[algorithm]
name = "fpdgd"
rounds = [2]
clients = [20]
queries_per_client = [2]

[probe]
click_models = ["perfect"]
probe_cohort = [8]
min_shown = 5

[audit]
defenses = ["none", "secagg"]
attacks = ["olsr", "random3"]
trials = 200
"""


@pytest.fixture()
def spec_path(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(textwrap.dedent(TINY))
    return path


def stored(path):
    """Every result table of a store, without timing columns, sorted for comparison."""
    tables = load(path)
    out = {}
    for name in ("attacks", "utility", "curves", "audits"):
        frame = tables[name].drop(columns=[c for c in ("seconds", "finished_at") if c in tables[name]])
        out[name] = frame.sort_values(list(frame.columns[:4])).reset_index(drop=True)
    return out


def assert_same(a, b):
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=True)


def test_same_seed_same_results_serial_pool_and_dask(tmp_path):
    # secagg-protocol with OLSR once differed under Dask (BLAS thread count): keep it in the grid
    path = tmp_path / "tiny.toml"
    path.write_text(textwrap.dedent(TINY).replace('"none", "secagg"]', '"none", "secagg", "secagg-protocol"]'))
    spec = load_spec(path)
    counts = run_campaign(spec, ResultsStore(tmp_path / "serial.sqlite"), executor=Executor(workers=1))
    assert counts == {"done": 6, "failed": 0, "skipped": 0, "running_elsewhere": 0}
    run_campaign(spec, ResultsStore(tmp_path / "pool.sqlite"), executor=Executor(workers=2))
    serial = stored(tmp_path / "serial.sqlite")
    assert len(serial["attacks"]) > 0
    assert_same(serial, stored(tmp_path / "pool.sqlite"))

    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        run_campaign(spec, ResultsStore(tmp_path / "dask.sqlite"),
                     executor=Executor(scheduler=cluster.scheduler_address))
    assert_same(serial, stored(tmp_path / "dask.sqlite"))


def test_rerun_skips_completed_runs(spec_path, tmp_path):
    spec = load_spec(spec_path)
    store = ResultsStore(tmp_path / "s.sqlite")
    run_campaign(spec, store, executor=Executor(workers=1))
    assert run_campaign(spec, store, executor=Executor(workers=1)) == {"done": 0, "failed": 0, "skipped": 4, "running_elsewhere": 0}


def test_killed_campaign_completes_on_rerun_without_duplicates(spec_path, tmp_path):
    db = tmp_path / "killed.sqlite"
    cmd = [sys.executable, "-m", "fltr_audit", "campaign", "run", str(spec_path), "--store", str(db),
           "--workers", "1", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    done = 0
    while time.time() < deadline and proc.poll() is None:
        if db.exists():
            try:
                with closing(sqlite3.connect(db, timeout=5)) as conn, conn:
                    done = conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'done'").fetchone()[0]
            except sqlite3.OperationalError:
                done = 0
            if done >= 1:
                break
        time.sleep(0.05)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert done >= 1, "the campaign recorded no run before the deadline"

    keys = {r.key for r in expand(load_spec(spec_path))}
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    tables = load(db)
    runs = tables["runs"]
    assert sorted(runs.loc[runs["status"] == "done", "run_key"]) == sorted(keys)
    utility = tables["utility"]
    assert sorted(utility["run_key"]) == sorted(keys)  # one utility row per run: none missing, none twice
    per_run = tables["attacks"].groupby("run_key").size()
    assert set(per_run.index) == keys and per_run.nunique() == 1


def test_failed_run_is_recorded_and_the_rest_go_on(spec_path, tmp_path):
    spec = load_spec(spec_path)

    def flaky(spec):
        if spec.seed == 1:
            raise RuntimeError("boom")
        from fltr_audit.runs.campaign import execute_run

        return execute_run(spec)

    store = ResultsStore(tmp_path / "f.sqlite")
    counts = run_campaign(spec, store, executor=Executor(workers=1), run_fn=flaky)
    assert counts == {"done": 2, "failed": 2, "skipped": 0, "running_elsewhere": 0}
    status = store.status()
    assert sorted(status["status"]) == ["done", "done", "failed", "failed"]
    assert status.loc[status["status"] == "failed", "error"].str.contains("boom").all()


def test_same_results_on_a_dask_scheduler_and_workers_started_on_localhost(tmp_path):
    """`dask scheduler` and `dask worker` as separate processes on 127.0.0.1 (each stopped by its pid)."""
    distributed = pytest.importorskip("distributed")
    import json
    import shutil

    # beside the interpreter first: a venv's python run without activation has no dask on its PATH
    dask = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")
    if dask is None:
        pytest.skip("the dask command is not installed")
    path = tmp_path / "tiny.toml"
    path.write_text(textwrap.dedent(TINY))
    spec = load_spec(path)
    run_campaign(spec, ResultsStore(tmp_path / "serial.sqlite"), executor=Executor(workers=1))
    scheduler_file = tmp_path / "scheduler.json"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(scheduler_file)], **quiet)]
    try:
        deadline = time.monotonic() + 120
        while not (scheduler_file.exists() and scheduler_file.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        procs.append(subprocess.Popen([dask, "worker", "--scheduler-file", str(scheduler_file), "--nworkers", "2",
                                       "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"], **quiet))
        with distributed.Client(address, timeout=120) as client:
            client.wait_for_workers(2, timeout=120)
        counts = run_campaign(spec, ResultsStore(tmp_path / "remote.sqlite"), executor=Executor(scheduler=address))
        assert counts["done"] == 4 and counts["failed"] == 0
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
    assert_same(stored(tmp_path / "serial.sqlite"), stored(tmp_path / "remote.sqlite"))
