"""Shared fixtures: the real MQ2008 folds (skipped with a reason when absent)."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MQ2008 = Path(os.environ.get("FLTR_MQ2008", REPO.parent / "shared" / "data" / "letor" / "MQ2008"))


@pytest.fixture(scope="session")
def mq2008_dir() -> Path:
    """The MQ2008 5-fold folder; tests using it skip on a machine without the data."""
    if not (MQ2008 / "Fold1" / "train.txt").is_file():
        pytest.skip(f"MQ2008 not found at {MQ2008} (set FLTR_MQ2008 to its folder)")
    return MQ2008


SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` the tests listed in tests/slow_tests.txt (measured with ``--durations``: the
    quick subset ``pytest -m "not slow"`` leaves them out; CI runs everything). A line names a test
    function (``tests/test_x.py::test_y``, every parametrization) or a whole file."""
    if not SLOW_LIST.is_file():
        return
    listed = {line.split("#")[0].strip() for line in SLOW_LIST.read_text().splitlines()}
    listed.discard("")
    for item in items:
        path = item.nodeid.split("::")[0]
        function = item.nodeid.split("[")[0]
        if path in listed or function in listed:
            item.add_marker(pytest.mark.slow)
