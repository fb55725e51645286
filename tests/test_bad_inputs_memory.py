"""Memory bound: a 6 KB LETOR file naming feature id 3,000,000 (or 10^9) is rejected before any
array of that width exists. Measured in a fresh process: peak RSS (VmHWM, asserted under 200 MB) and
the time of the rejection (printed, never asserted)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RSS_LIMIT_MB = 200

MEASURE = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
import pandas, sklearn.datasets  # imported before timing: the rejection is what is measured
from fltr_audit.data.letor import read_letor
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
