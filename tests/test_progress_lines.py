"""Progress off a terminal (issue 36): with stderr a pipe (nohup, CI logs, a notebook's subprocess),
``demo``, ``campaign run`` and ``audit-run`` print a plain line per step (a run, a stage, a training) as it finishes -- not one line at the end --
and nothing with ``--quiet``."""

import re
import subprocess
import sys
import textwrap

import pytest

from tests.test_campaign_run import TINY

LINE = re.compile(r"^(?P<label>.+): (?P<done>\d+)/(?P<total>\d+) done, \d+ s elapsed(, about .+ left)?$")


def _steps(stderr: str) -> list[tuple[str, int, int]]:
    found = [LINE.match(line) for line in stderr.splitlines()]
    return [(m["label"], int(m["done"]), int(m["total"])) for m in found if m]


@pytest.mark.slow
def test_the_demo_reports_each_run_the_epsilon_table_and_the_report(tmp_path):
    cmd = [sys.executable, "-m", "fltr_audit", "demo", "--out", str(tmp_path / "d"), "--data",
           "synthetic:mq2008?queries=60", "--rounds", "1", "--clients", "10", "--probe-lists", "20", "--workers", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    steps = _steps(done.stderr)
    assert [d for _, d, _ in steps] == list(range(1, len(steps) + 1)) and len(steps) >= 3
    assert steps[-1][1] == steps[-1][2]
    assert steps[-2][0] == "demo: FOLtR-ES epsilon table" and steps[-1][0] == "demo: report"
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # every run reused
    assert [label for label, _, _ in _steps(again.stderr)] == ["demo: FOLtR-ES epsilon table", "demo: report"]


def test_a_campaign_reports_each_run_and_nothing_when_quiet(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(textwrap.dedent(TINY))
    cmd = [sys.executable, "-m", "fltr_audit", "campaign", "run", str(path), "--workers", "1"]
    done = subprocess.run([*cmd, "--store", str(tmp_path / "a.sqlite")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert [(d, t) for _, d, t in _steps(done.stderr)] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    quiet = subprocess.run([*cmd, "--store", str(tmp_path / "b.sqlite"), "--quiet"], capture_output=True, text=True,
                           timeout=600)
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_audit_run_reports_each_training():
    cmd = [sys.executable, "-m", "fltr_audit", "audit-run", "fpdgd", "--data", "synthetic:mq2008?queries=60",
           "--rounds", "2", "--clients", "20", "--population", "200", "--canaries", "80", "--runs", "3"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert [(d, t) for _, d, t in _steps(done.stderr)] == [(1, 3), (2, 3), (3, 3)]
