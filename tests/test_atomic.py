"""fltr_audit.base.atomic: exclusive temporary names in the target folder, links never followed,
nothing left behind on failure, stale temporaries of killed writers swept."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from fltr_audit.base.atomic import temporary_dir, write_file, write_files, write_with
from fltr_audit.errors import FltrError


class _Names:
    """Stands in for tempfile's name generator: a fixed sequence of candidate names."""

    def __init__(self, names):
        self.names = list(names)

    def __iter__(self):
        return self

    def __next__(self):
        return self.names.pop(0)


def _plant_links(folder: Path, target_name: str, victim: Path, candidates: list[str]) -> list[Path]:
    """Links to ``victim`` at every temporary name a write of ``target_name`` could use: the
    old fixed names and the first mkstemp candidates."""
    pid = os.getpid()
    names = [f"{target_name}.tmp", f".{target_name}.tmp", f"{target_name}.part", f".{target_name}.tmp{pid}"]
    names += [f".{target_name}.{pid}.{c}.tmp" for c in candidates]
    links = []
    for name in names:
        link = folder / name
        link.symlink_to(victim)
        links.append(link)
    return links


def test_a_link_planted_at_every_temporary_name_leaves_its_target_untouched(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    candidates = ["aaaaaaaa", "bbbbbbbb", "cccccccc"]
    links = _plant_links(out, "compare.csv", victim, candidates[:2])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: _Names(candidates))
    write_file(out / "compare.csv", "a,b\n1,2\n")
    assert victim.read_text() == "precious"
    assert (out / "compare.csv").read_text() == "a,b\n1,2\n" and not (out / "compare.csv").is_symlink()
    assert all(link.is_symlink() for link in links)  # skipped, not followed, not removed


def test_a_link_at_the_target_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "report.md").symlink_to(victim)
    write_file(tmp_path / "report.md", "# report\n")
    assert victim.read_text() == "precious"
    assert not (tmp_path / "report.md").is_symlink()


def test_write_files_links_at_every_name_of_a_report(tmp_path, monkeypatch):
    """The report's files (as H11's render_report returns them) written with write_files."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "report"
    (out / "plots").mkdir(parents=True)
    files = {"report.html": "<html></html>", "report.md": "# r\n", "compare.csv": "a\n1\n",
             "plots/utility.png": b"\x89PNG..."}
    for name in files:
        folder, base = (out / name).parent, (out / name).name
        _plant_links(folder, base, victim, ["dddddddd"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: _Names(["dddddddd", "eeeeeeee"] * 10))
    write_files(out, files)
    assert victim.read_text() == "precious"
    assert (out / "plots" / "utility.png").read_bytes() == b"\x89PNG..."


@pytest.mark.parametrize("name", ["../escape.txt", "/abs.txt", "a/../../b.txt"])
def test_write_files_refuses_paths_outside_the_folder(tmp_path, name):
    with pytest.raises(FltrError, match="outside the output folder"):
        write_files(tmp_path / "out", {name: "x"})
    assert not (tmp_path / "escape.txt").exists()


def test_a_failing_writer_leaves_no_temporary_file(tmp_path):
    def boom(handle):
        handle.write(b"half")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        write_with(tmp_path / "model.npy", boom)
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_one_error_naming_the_file(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(FltrError, match=r"model\.npy: cannot write \(no space left on the device\)"):
        write_with(tmp_path / "model.npy", lambda fh: np.save(fh, np.zeros(3)))
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_cannot_be_written_is_one_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(FltrError, match="cannot write"):
        write_file(blocker / "out.txt", "x")


def test_temporaries_of_a_killed_writer_are_swept_by_the_next_write(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    pid = int(dead.stdout)
    stale_file = tmp_path / f".curves.csv.{pid}.abcdefgh.tmp"
    stale_file.write_text("half")
    stale_dir = tmp_path / f".run.tmp-{pid}-abcdefgh"
    stale_dir.mkdir()
    live = tmp_path / f".curves.csv.{os.getppid()}.abcdefgh.tmp"  # a writer that still runs
    live.write_text("in progress")
    unrelated = tmp_path / ".curves.csv.notes"
    unrelated.write_text("keep")
    write_file(tmp_path / "curves.csv", "x\n")
    with temporary_dir(tmp_path / "run"):
        pass
    assert not stale_file.exists() and not stale_dir.exists()
    assert live.exists() and unrelated.exists()


def test_temporary_dir_is_removed_when_the_block_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with temporary_dir(tmp_path / "out") as tmp:
            (tmp / "half.csv").write_text("x")
            raise RuntimeError("failed")
    assert list(tmp_path.iterdir()) == []


def test_report_command_does_not_follow_a_planted_link(tmp_path, monkeypatch):
    """The ``report`` command: a link planted at every temporary
    name it could use leaves the link's target untouched."""
    from fltr_audit.runs.campaign import run_campaign
    from fltr_audit.runs.executors import Executor
    from fltr_audit.spec.campaign import validate_spec
    from fltr_audit.cli import main
    from fltr_audit.store.results import ResultsStore

    spec = validate_spec({"name": "r", "data": {"spec": "synthetic:mq2008?queries=40"},
                          "algorithm": {"rounds": 1, "clients": 5, "queries_per_client": 2},
                          "probe": {"click_models": ["perfect"], "probe_cohort": 4, "min_shown": 5},
                          "audit": {"attacks": ["olsr", "random3"], "trials": 100}})
    store = tmp_path / "s.sqlite"
    run_campaign(spec, ResultsStore(store), executor=Executor(workers=1))
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "report"
    out.mkdir()
    names = ["report.html", "report.md", "compare.csv", "attacks.csv", "audits.csv", "utility.csv"]
    for name in names:
        _plant_links(out, name, victim, ["ffffffff"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: _Names(["ffffffff", "gggggggg"] * 50))
    main(["report", "--store", str(store), "--out", str(out)])
    assert victim.read_text() == "precious"
