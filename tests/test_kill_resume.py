"""A campaign SIGKILLed at random points, then completed: every run once, the store intact,
the results identical to an uninterrupted run, and no worker process left behind. Two
concurrent campaigns on one store share the grid (run claiming)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest

from fltr_audit.runs.campaign import run_campaign

from fltr_audit.runs.executors import Executor

from fltr_audit.spec.campaign import load_spec

from fltr_audit.spec.grid import expand
from fltr_audit.store.results import ResultsStore, load
from tests.test_campaign_run import TINY
from tests.cli_json import cli_result

REPO = Path(__file__).resolve().parents[1]

SPEC = TINY.replace('name = "tiny"', 'name = "kill-resume"').replace("seeds = [0, 1]", "seeds = [0, 1, 2, 3, 4, 5, 6]")
"""``test_campaign_run``'s tiny campaign with seven seeds: enough runs to kill the campaign in the middle."""


def _descendants(pid: int) -> set[int]:
    """Process ids descending from ``pid`` (from /proc): its children (the pool's fork server, the
    resource tracker) and theirs (the pool's workers, forked by the server)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _gone(pids: set[int], timeout: float) -> set[int]:
    """The ``pids`` still running (not zombies) after waiting up to ``timeout`` seconds."""
    deadline = time.time() + timeout
    alive = set(pids)
    while alive and time.time() < deadline:
        for pid in list(alive):
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                state = "X"
            if state in ("X", "Z"):
                alive.discard(pid)
        time.sleep(0.1)
    return alive


def _done(db: Path) -> int:
    """Runs stored as done in ``db`` (0 before it exists)."""
    if not db.exists():
        return 0
    try:
        with closing(sqlite3.connect(db, timeout=5)) as conn, conn:
            return conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'done'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _claimed(db: Path) -> bool:
    """Whether a campaign process holds claims in the store at ``db`` (it has started its runs)."""
    if not db.exists():
        return False
    try:
        with closing(sqlite3.connect(db, timeout=1)) as conn, conn:
            return conn.execute("SELECT COUNT(*) FROM claims").fetchone()[0] > 0
    except sqlite3.OperationalError:
        return False


def _stored(path: Path) -> dict[str, pd.DataFrame]:
    tables = load(path)
    out = {}
    for name in ("attacks", "utility", "curves", "audits", "per_query"):
        frame = tables[name]
        sortable = frame.apply(lambda col: col.map(lambda v: repr(v) if isinstance(v, (list, dict)) else v))
        order = sortable.sort_values(list(frame.columns)).index  # list cells (ROC points) sort by their text
        out[name] = frame.loc[order].reset_index(drop=True)
    return out


def _command(spec: Path, store: Path, workers: int = 2) -> list[str]:
    return [sys.executable, "-m", "fltr_audit", "campaign", "run", str(spec), "--store", str(store),
            "--workers", str(workers), "--quiet", "--json"]


@pytest.mark.slow
def test_sigkilled_campaign_resumes_to_identical_results(tmp_path):
    spec_path = tmp_path / "c.toml"
    spec_path.write_text(textwrap.dedent(SPEC))
    spec = load_spec(spec_path)
    keys = {r.key for r in expand(spec)}
    db = tmp_path / "killed.sqlite"
    rng = random.Random(15)
    kills, leftovers, done_at_kill, attempts = 0, set(), [], 0
    start = time.time()
    while kills < 5:
        attempts += 1
        assert attempts <= 15, "could not land 5 kills before the campaign completed"
        # in-process runs (workers 1) and a pool (workers 2), which must not outlive the kill
        proc = subprocess.Popen(_command(spec_path, db, workers=1 + kills % 2), cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        workers: set[int] = set()
        before = _done(db)
        target = before + rng.choice([0, 1])  # kill once 0 or 1 more run is stored ...
        deadline = None  # ... plus a random 0-1 s
        while proc.poll() is None and (deadline is None or time.time() < deadline):
            workers |= _descendants(proc.pid)
            if deadline is None and _claimed(db) and _done(db) >= target:
                deadline = time.time() + rng.uniform(0.0, 1.0)
            time.sleep(0.05)
        if proc.poll() is not None:  # completed before the kill: start again on a fresh store
            assert proc.returncode == 0
            for path in tmp_path.glob("killed.sqlite*"):
                path.unlink()
            kills, done_at_kill = 0, []
            continue
        workers |= _descendants(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        leftovers |= _gone(workers, timeout=10.0)
        done_at_kill.append(_done(db))
    result = subprocess.run(_command(spec_path, db), cwd=REPO, capture_output=True, text=True, timeout=300)
    elapsed = time.time() - start
    assert result.returncode == 0, result.stderr
    counts = cli_result(result.stdout)
    print(f"kill-resume: {kills} SIGKILLs ({attempts} attempts), done at each kill {done_at_kill} of {len(keys)}, "
          f"final run {counts['done']} done {counts['skipped']} skipped, {elapsed:.1f} s in all")
    assert not leftovers, f"worker processes outlived the killed campaign: {sorted(leftovers)}"

    with closing(sqlite3.connect(db)) as conn, conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT run_key, COUNT(*) FROM runs GROUP BY run_key").fetchall()
        assert conn.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    assert all(n == 1 for _, n in rows)
    tables = load(db)
    runs = tables["runs"]
    assert sorted(runs.loc[runs["status"] == "done", "run_key"]) == sorted(keys)
    assert sorted(tables["utility"]["run_key"]) == sorted(keys)  # no run's rows missing or twice

    reference = tmp_path / "reference.sqlite"
    run_campaign(spec, ResultsStore(reference), executor=Executor(workers=1))
    killed, clean = _stored(db), _stored(reference)
    for name in clean:
        pd.testing.assert_frame_equal(killed[name], clean[name], check_exact=True)


@pytest.mark.slow
def test_two_concurrent_campaigns_compute_each_run_once(tmp_path):
    spec_path = tmp_path / "c.toml"
    spec_path.write_text(textwrap.dedent(SPEC))
    db = tmp_path / "shared.sqlite"
    ResultsStore(db)
    procs = [subprocess.Popen(_command(spec_path, db, workers=1), cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    counts = [cli_result(out) for out, _ in outputs]
    grid = len(expand(load_spec(spec_path)))
    assert sum(c["done"] for c in counts) == grid, counts  # each run computed by exactly one process
    assert load(db)["runs"]["status"].eq("done").sum() == grid


def test_claims_of_a_live_owner_are_respected_and_of_a_dead_one_taken_over(tmp_path):
    store = ResultsStore(tmp_path / "s.sqlite")
    assert store.claim(["a", "b"]) == ["a", "b"]
    claim_elsewhere = ("import sys; sys.path.insert(0, %r); from fltr_audit.store.results import ResultsStore; "
                       "print(','.join(ResultsStore(%r).claim(['a', 'b', 'c'])))") % (str(REPO), str(store.path))
    other = subprocess.run([sys.executable, "-c", claim_elsewhere], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "c"  # a and b are held by this (live) process; c was free
    # the other process has exited: its claim on c is free again, ours stay ours
    assert store.claim(["a", "b", "c"]) == ["a", "b", "c"]
    store.release_claims(["a"])
    assert sorted(store.claims()["run_key"]) == ["b", "c"]


def test_expired_lease_is_taken_over(tmp_path):
    store = ResultsStore(tmp_path / "s.sqlite")
    with closing(sqlite3.connect(store.path)) as conn, conn:  # a claim by a process on another host
        conn.execute("INSERT INTO claims VALUES ('x', 'elsewhere', 1, ?)", (time.time() + 60,))
        conn.execute("INSERT INTO claims VALUES ('y', 'elsewhere', 1, ?)", (time.time() - 1,))
    assert store.claim(["x", "y"]) == ["y"]


def _train_command(out: Path) -> list[str]:
    return [sys.executable, "-m", "fltr_audit", "train", "fpdgd", "--data", "synthetic:mq2008?queries=200",
            "--out", str(out), "--rounds", "100000", "--clients", "20", "--queries-per-client", "2",
            "--eval-every", "1000", "--quiet"]


def _wait_for_temporary(parent: Path, proc: subprocess.Popen, timeout: float = 60.0) -> list[Path]:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        found = [p for p in parent.iterdir() if ".tmp" in p.name]
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("train never created its temporary output folder")


@pytest.mark.slow
def test_terminated_train_leaves_no_debris_and_a_killed_ones_is_swept(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(_train_command(out), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    _wait_for_temporary(tmp_path, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err.strip() == "fltr-audit: terminated"  # 128 + SIGTERM
    assert list(tmp_path.iterdir()) == []  # the temporary folder went with it; no --out

    proc = subprocess.Popen(_train_command(out), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    debris = _wait_for_temporary(tmp_path, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert all(p.exists() for p in debris)  # SIGKILL cannot clean up ...
    done = subprocess.run(_train_command(out)[:9] + ["--rounds", "1", "--clients", "4", "--queries-per-client",
                                                      "2", "--quiet"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # ... the next write of that output sweeps it
