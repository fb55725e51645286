"""Memory bound: a 6 KB LETOR file naming feature id 3,000,000 (or 10^9) is rejected before any
array of that width exists. Measured in a fresh process: peak RSS (VmHWM, asserted under 200 MB) and
the time of the rejection (printed, never asserted)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
RSS_LIMIT_MB = 200

MEASURE = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
import pandas, sklearn.datasets  # imported before timing: the rejection is what is measured
from fltr_audit.engine.data.letor import read_letor
from fltr_audit.errors import FltrError
start = time.perf_counter()
try:
    read_letor({path!r})
    error = None
except FltrError as exc:
    error = str(exc)
seconds = time.perf_counter() - start
# VmHWM: the peak RSS of this process's own address space. ru_maxrss (getrusage) is kept
# across fork and exec on Linux, so it reports the pytest parent's peak when that is larger.
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(json.dumps({{"error": error, "seconds": seconds,
                  "peak_rss_mb": int(hwm[0].split()[1]) / 1024 if hwm else None,
                  "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def _hostile(path: Path, feature_id: int) -> Path:
    rng = random.Random(3)
    lines = []
    for i in range(40):  # a sparse file (lines leave zero features out), about 6 KB
        ids = sorted(rng.sample(range(1, 46), rng.randint(8, 14))) + [46]
        lines.append(f"{i % 3} qid:{i // 8} " + " ".join(f"{j}:0.{j}" for j in ids))
    lines[20] += f" {feature_id}:1"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("feature_id", [3_000_000, 10**9])
def test_hostile_sparse_file_is_rejected_within_the_memory_bound(tmp_path, feature_id):
    path = _hostile(tmp_path / "hostile.txt", feature_id)
    assert path.stat().st_size < 8_000
    out = subprocess.run([sys.executable, "-c", MEASURE.format(repo=str(REPO), path=str(path))],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    if figures["peak_rss_mb"] is None:
        pytest.skip("no /proc/self/status VmHWM on this system")
    print(f"hostile file, feature id {feature_id:,}: rejected in {figures['seconds']:.3f} s, "
          f"peak RSS {figures['peak_rss_mb']:.0f} MB (ru_maxrss {figures['ru_maxrss_mb']:.0f} MB)")
    assert figures["error"] is not None and "line 21" in figures["error"] and str(feature_id) in figures["error"]
    assert figures["peak_rss_mb"] < RSS_LIMIT_MB


# --- round 2 (issue 23): bombs through the whole command, peak RSS under 500 MB --------------

BOMB_RSS_LIMIT_MB = 500

RUN_CLI = """
import json, sys
sys.path.insert(0, {repo!r})
from fltr_audit.cli import main
code = main({argv!r})
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(json.dumps({{"code": code, "peak_rss_mb": int(hwm[0].split()[1]) / 1024 if hwm else None}}))
"""


def _gzip_stream(path: Path, pattern: bytes, total: int) -> Path:
    """``total`` bytes of ``pattern`` repeated, gzip-compressed in chunks (never held whole)."""
    import gzip

    chunk = pattern * ((16 << 20) // len(pattern))
    with gzip.open(path, "wb", compresslevel=1) as fh:
        for _ in range(total // len(chunk)):
            fh.write(chunk)
    return path


def _bomb(kind: str, folder: Path) -> tuple[list[str], str]:
    """The command line of one bomb and the culprit its error must name."""
    if kind == "gzip-1GiB-of-nuls":
        path = _gzip_stream(folder / "b.txt.gz", b"\0", 1 << 30)
        return ["data", "info", str(path)], "b.txt.gz, line 1"
    if kind == "gzip-1GiB-of-newlines":
        path = _gzip_stream(folder / "n.txt.gz", b"\n", 1 << 30)
        return ["data", "info", str(path)], "compression bomb"
    if kind == "line-512MiB":
        path = folder / "long.txt"
        with open(path, "wb") as fh:  # a sparse file: 512 MiB of NULs on one line, no disk used
            fh.write(b"1 qid:1 1:0.5 2:0.1\n" * 3)
            fh.truncate(512 << 20)
        return ["data", "info", str(path)], "long.txt, line 4"
    if kind == "audit-defense-dim-1e9":
        return ["audit-defense", "dp-local-laplace(eps=1)", "--dim", str(10**9)], "--dim"
    if kind == "audit-defense-trials-1e12":
        return ["audit-defense", "dp-local-laplace(eps=1)", "--trials", str(10**12)], "--trials"
    raise AssertionError(kind)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gzip-1GiB-of-nuls", "gzip-1GiB-of-newlines", "line-512MiB",
                                  "audit-defense-dim-1e9", "audit-defense-trials-1e12"])
def test_bomb_is_refused_in_one_line_within_500_mb(tmp_path, kind):
    argv, culprit = _bomb(kind, tmp_path)
    env = {**os.environ, "FLTR_AUDIT_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", RUN_CLI.format(repo=str(REPO), argv=argv)], capture_output=True,
                         text=True, timeout=600, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert figures["code"] == 2 and len(lines) == 1 and culprit in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    if figures["peak_rss_mb"] is None:
        pytest.skip("no /proc/self/status VmHWM on this system")
    print(f"{kind}: peak RSS {figures['peak_rss_mb']:.0f} MB; {lines[0]}")
    assert figures["peak_rss_mb"] < BOMB_RSS_LIMIT_MB


# --- round 3 (issue 39): every bomb of the new families in one fresh process, peak RSS each -----

RUN_BOMBS = """
import contextlib, io, json, sys
sys.path.insert(0, {repo!r})
from fltr_audit.cli import main
main(["epsilon", "--length", "3", "--p", "0.9"])  # imports done: what follows measures the bombs
results = []
for name, argv in {bombs!r}:
    open("/proc/self/clear_refs", "w").write("5")  # resets VmHWM to the current RSS
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
    results.append({{"name": name, "code": code, "stderr": err.getvalue(),
                    "peak_rss_mb": int(hwm[0].split()[1]) / 1024}})
print(json.dumps(results))
"""


def _round3_bombs(folder: Path) -> list[tuple[str, list[str], str]]:
    """(name, command line, culprit) of every round-3 bomb, their files made in ``folder``."""
    from fltr_audit.cli import main
    from tests import test_bad_inputs_recordings as recordings

    run = folder / "run"
    assert main(["train", "fpdgd", "--data", "synthetic:mq2008?queries=50", "--out", str(run), "--rounds", "2",
                 "--clients", "4", "--queries-per-client", "2", "--record-rounds", "every:1", "--quiet"]) == 0
    bombs = []
    for name, make in recordings.MEMORY_BOMBS.items():
        rec = Path(shutil.copytree(run / "recording", folder / name))
        bombs.append((f"recording-{name}", ["attack", str(rec), "--attack", "olsr", "--quiet"], make(rec)))
    rec = Path(shutil.copytree(run / "recording", folder / "nan"))
    recordings.rewrite_arrays(rec / "batch-000001.npz", global_params=np.full(46, np.nan))
    bombs.append(("recording-nan-global-params", ["attack", str(rec), "--quiet"], "'global_params'"))
    rec = Path(shutil.copytree(run / "recording", folder / "rounds-5000"))
    manifest = json.loads((rec / "manifest.json").read_text())
    manifest["rounds"] = [{**manifest["rounds"][0], "round": r} for r in range(1, 5001)]
    (rec / "manifest.json").write_text(json.dumps(manifest))
    bombs.append(("recording-one-batch-5000-rounds", ["attack", str(rec), "--quiet"], "rounds[1].file"))
    small = ["--data", "synthetic:mq2008?queries=60", "--quiet"]
    audit = ["audit", *small, "--rounds", "1", "--clients", "10", "--queries-per-client", "2",
             "--click-model", "perfect", "--probe-cohort", "5", "--attack", "olsr", "--no-epsilon-audit"]
    return bombs + [
        ("audit-population-1e15", [*audit, "--population", str(10**15)], "--population"),
        ("audit-run-population-1e15", ["audit-run", "fpdgd", "--data", "synthetic:mq2008?queries=60", "--rounds", "1",
                                       "--clients", "20", "--canaries", "10", "--population", str(10**15)],
         "--population"),
        ("train-population-1e15", ["train", "fpdgd", *small, "--out", str(folder / "o"), "--rounds", "1",
                                   "--population", str(10**15)], "--population"),
        ("epsilon-length-1e9", ["epsilon", "--length", str(10**9)], "--length"),
        ("audit-counterfactual-1e9", [*audit, "--counterfactual", str(10**9)], "--counterfactual"),
        ("audit-power-min-effect-1e-300", ["audit", "--power", "0.9", "--min-effect", "1e-300", "--quiet"],
         "--min-effect"),
    ]


def test_round3_bombs_are_refused_in_one_line_within_500_mb(tmp_path):
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("no /proc/self/clear_refs to reset the peak RSS between bombs")
    bombs = _round3_bombs(tmp_path)
    script = RUN_BOMBS.format(repo=str(REPO), bombs=[(name, argv) for name, argv, _ in bombs])
    env = {**os.environ, "FLTR_AUDIT_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                         env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    results = {r["name"]: r for r in json.loads(out.stdout.strip().splitlines()[-1])}
    for name, _, culprit in bombs:
        r = results[name]
        lines = [line for line in r["stderr"].splitlines() if line.strip()]
        assert r["code"] == 2 and len(lines) == 1 and culprit in lines[0], (name, r)
        assert "Traceback" not in r["stderr"] and "internal error" not in lines[0], (name, r)
    ranked = sorted(results.values(), key=lambda r: -r["peak_rss_mb"])
    for r in ranked:
        print(f"{r['name']}: peak RSS {r['peak_rss_mb']:.0f} MB")
    largest = ranked[0]
    assert largest["peak_rss_mb"] < BOMB_RSS_LIMIT_MB, f"largest: {largest['name']} {largest['peak_rss_mb']:.0f} MB"
