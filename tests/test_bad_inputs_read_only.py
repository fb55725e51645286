"""Bad-input family: read-only places (issue 39, item 8). The read-only commands (``compare``,
``campaign status``, ``report``) read a WAL-mode store inside a folder this process may not write
-- never writing a byte there, as docs/store.md promises "also on a read-only file system" -- and
refuse in one line the one store they cannot read consistently (a write-ahead log holding commits
without its index). Tests run as root often: a folder chmod 555 stops no root process, so the
commands run in a user namespace without a mapping (``unshare --user``), where root's files are
checked by their owner bits like anyone's; ``store.read_only.read_only_mode`` is also tested directly."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from fltr_audit.cli import main
from tests.test_bad_inputs import CAMPAIGN_BASE

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A real WAL-mode store of one run, checkpointed (no -wal, no -shm beside it)."""
    folder = tmp_path_factory.mktemp("store")
    (folder / "c.toml").write_text(CAMPAIGN_BASE)
    path = folder / "s.sqlite"
    assert main(["campaign", "run", str(folder / "c.toml"), "--store", str(path), "--workers", "1", "--quiet"]) == 0
    with closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    return path


def _unwritable_runner() -> list[str]:
    """The prefix that runs a command unable to write a 0o555 folder: none for a user other than
    root, ``unshare --user`` (root without capabilities) for root; skip where neither works."""
    if os.geteuid() != 0:
        return []
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--user", "true"]).returncode != 0:
        pytest.skip("running as root without user namespaces: no folder is read-only to this process")
    return ["unshare", "--user"]


def _run(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    """``fltr-audit ARGV`` unable to write ``folder`` (made 0o555 for the call)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "FLTR_AUDIT_CACHE": str(folder.parent / "cache")}
    folder.chmod(0o555)
    try:
        return subprocess.run([*_unwritable_runner(), sys.executable, "-m", "fltr_audit", *argv], cwd=folder.parent,
                              env=env, capture_output=True, text=True, timeout=300)
    finally:
        folder.chmod(0o755)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.parametrize("command", ["compare", "status", "report"])
def test_a_wal_store_in_a_read_only_folder_is_read_without_writing(store, tmp_path, command):
    folder = tmp_path / "ro"
    folder.mkdir()
    shutil.copy(store, folder / "s.sqlite")
    before = _files(folder)
    argv = {"compare": ["compare", "--store", "ro/s.sqlite"],
            "status": ["campaign", "status", "--store", "ro/s.sqlite"],
            "report": ["report", "--store", "ro/s.sqlite", "--out", str(tmp_path / "r")]}[command]
    done = _run(folder, *argv)
    assert done.returncode == 0, done.stderr
    assert _files(folder) == before, "a read-only command wrote into the store's folder"


def _store_with_a_live_log(src: Path, folder: Path, keep_index: bool) -> Path:
    """A copy of ``src`` whose last commit lives only in its write-ahead log (``-wal``), with or
    without the log's index (``-shm``), as a writer that was killed leaves it."""
    work = folder.parent / "live"
    work.mkdir()
    path = work / "s.sqlite"
    shutil.copy(src, path)
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE runs SET campaign = 'from-the-log'")
    writer.commit()
    folder.mkdir()
    for suffix in ("", "-wal") + (("-shm",) if keep_index else ()):
        shutil.copy(f"{path}{suffix}", folder / f"s.sqlite{suffix}")
    writer.close()
    return folder / "s.sqlite"


def test_the_commits_of_a_live_log_are_read_in_a_read_only_folder(store, tmp_path):
    folder = tmp_path / "ro"
    _store_with_a_live_log(store, folder, keep_index=True)
    before = _files(folder)
    done = _run(folder, "campaign", "status", "--store", "ro/s.sqlite")
    assert done.returncode == 0, done.stderr
    assert "from-the-log" in done.stdout  # the commit only the log holds
    after = _files(folder)  # readers mark the shared WAL index (-shm) as SQLite does; nothing else changes
    assert after.keys() == before.keys() and after["s.sqlite"] == before["s.sqlite"]
    assert after["s.sqlite-wal"] == before["s.sqlite-wal"]


def test_a_live_log_without_its_index_in_a_read_only_folder_is_refused_in_one_line(store, tmp_path):
    folder = tmp_path / "ro"
    _store_with_a_live_log(store, folder, keep_index=False)
    before = _files(folder)
    done = _run(folder, "compare", "--store", "ro/s.sqlite")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "s.sqlite" in lines[0] and "s.sqlite-wal" in lines[0]
    assert _files(folder) == before


def test_the_open_mode_follows_what_the_folder_allows(store, tmp_path, monkeypatch):
    """The code path without a read-only folder: ``os.access`` says the folder is not writable."""
    from fltr_audit.store.read_only import read_only_mode

    path = tmp_path / "s.sqlite"
    shutil.copy(store, path)
    assert read_only_mode(path) == "mode=ro"
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == tmp_path else real(p, mode))
    assert read_only_mode(path) == "immutable=1"
    assert main(["campaign", "status", "--store", str(path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite"], "an immutable open made a -shm or -wal"
