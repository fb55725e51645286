"""The local pool's workers: forked from one server that imported the run code once
(``runs.pool_preload``), yet each sees the caller's environment as it is when its pool starts --
as a freshly spawned worker did -- not the server's, which is the caller's of the first pool."""

import multiprocessing
import os
import sys

import pytest

from fltr_audit.runs.executors import Executor, Task

MARK = "FLTR_AUDIT_TEST_POOL_MARK"


def _environment_mark(_: int) -> str | None:
    return os.environ.get(MARK)


def _origin(_: int) -> tuple[int, bool]:
    """The worker's parent and whether the run code was imported before the task arrived."""
    return os.getppid(), "fltr_audit.runs.pool_preload" in sys.modules


def test_a_worker_sees_the_callers_environment_of_now_not_the_servers(monkeypatch):
    tasks = [Task(str(i), i) for i in range(4)]
    monkeypatch.setenv(MARK, "first")
    assert Executor(workers=2).results(_environment_mark, tasks) == ["first"] * 4
    monkeypatch.setenv(MARK, "second")  # the fork server started with "first"
    assert Executor(workers=2).results(_environment_mark, tasks) == ["second"] * 4
    monkeypatch.delenv(MARK)
    assert Executor(workers=2).results(_environment_mark, tasks) == [None] * 4


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(),
                    reason="no fork server on this platform: each worker is spawned")
def test_the_workers_are_forked_from_one_server_that_imported_the_run_code():
    origins = Executor(workers=2).results(_origin, [Task(str(i), i) for i in range(4)])
    parents = {parent for parent, _ in origins}
    assert len(parents) == 1 and os.getpid() not in parents
    assert all(preloaded for _, preloaded in origins)
