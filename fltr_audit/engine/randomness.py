"""Named, independent random streams derived from one run seed (DESIGN.md, Randomness).

Every stream is ``numpy.random.Generator(PCG64(SeedSequence(seed, spawn_key=...)))`` with a
spawn key built from a purpose name and integers (for example the round number), so the
same seed gives the same numbers in any process, in any order of requests.
"""

from __future__ import annotations

import zlib

import numpy as np

from fltr_audit.constraints import SEED, check


def check_seed(seed: object, name: str = "seed") -> int:
    """``seed`` as an int, or ParameterError naming ``name`` unless it is an integer 0..2^63-1."""
    check(name, seed, SEED)
    return int(seed)


def stream(seed: int, purpose: str, *index: int) -> np.random.Generator:
    """Return the generator for ``purpose`` (and e.g. a round number) under run ``seed``.

    Parameters
    ----------
    seed : int
        The run seed (non-negative).
    purpose : str
        What the stream drives, e.g. ``"queries"``, ``"clicks"``, ``"public-seeds"``.
        Different purposes give statistically independent streams.
    *index : int
        Further non-negative integers, e.g. the round number.
    """
    key = (zlib.crc32(purpose.encode()),) + tuple(int(i) for i in index)
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(check_seed(seed), spawn_key=key)))
