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
