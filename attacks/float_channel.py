"""The floating-point side channel of a run's canaries, reported as its own finding (issue 37, item 5).

A mechanism specified over the reals can leak through its floating-point implementation: the
low bits of textbook Laplace noise added to a value reveal that value (Mironov, "On Significance
of the Least Significant Bits for Differential Privacy", CCS 2012). The claim verdict ranks the
canaries' scores rounded to ``attacks.whole_run_bounds.SCORE_DECIMALS`` decimals with ties broken
at random, so it audits the mechanism as specified; this check looks at what the rounding hides.

Among the canaries that took part, those whose rounded scores are equal form a tie group (a
Laplace canary whose message lies beyond its clip scores exactly +-eps: about a third of them).
Within a group, a canary is *off* when its unrounded score differs from the group's most common
unrounded value (by a rounding unit or so). Were the implementation exact, which canary of a
group is off would not depend on its secret. The check tests each group's 2 x 2 table (present /
absent x off / on) with Fisher's exact test, two-sided (``scipy.stats.fisher_exact``), and
combines the groups' p-values by Fisher's method (``scipy.stats.combine_pvalues``): the
direction differs between groups (textbook Laplace: off canaries of the +eps group are present,
those of the -eps group absent), which a common-odds test would let cancel. ``flagged`` when the
combined test rejects at ``LEVEL``: the low bits tell present canaries from absent ones;
``cleared`` otherwise, including when no group holds an off canary (nothing below the rounding
varies: a snapped or discrete mechanism).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from attacks.whole_run_bounds import SCORE_DECIMALS

LEVEL = 0.05
"""The test's level (the project's 95 %): a ``flagged`` finding is at most this likely for an exact
implementation (Fisher's exact tests are conservative)."""


@dataclass(frozen=True)
class FloatChannel:
    """The finding (``flagged`` or ``cleared``), the test's p-value (1 when nothing varies below the
    rounding or no group holds both secrets), the off canaries among the present and the absent ones
    of the tie groups, and the canaries in those groups."""

    finding: str
    pvalue: float
    off_present: int
    off_absent: int
    tied: int


def _tables(scores: np.ndarray, present: np.ndarray) -> np.ndarray:
    """The (2, 2, K) tables of the K tie groups with an off canary: rows present / absent, columns
    off / on (module docstring)."""
    rounded = np.round(scores, SCORE_DECIMALS)
    groups, inverse, sizes = np.unique(rounded, return_inverse=True, return_counts=True)
    tables = []
    for g in np.flatnonzero(sizes > 1):
        members = inverse == g
        raw, secret = scores[members], present[members]
        values, counts = np.unique(raw, return_counts=True)
        off = raw != values[np.argmax(counts)]
        if off.any():
            tables.append([[np.sum(secret & off), np.sum(secret & ~off)],
                           [np.sum(~secret & off), np.sum(~secret & ~off)]])
    return np.asarray(tables, dtype=np.float64).reshape(-1, 2, 2).transpose(1, 2, 0)


def float_side_channel(scores: np.ndarray, present: np.ndarray, eligible: np.ndarray) -> FloatChannel:
    """The floating-point check of the canaries' unrounded ``scores`` (module docstring) over the
    ``eligible`` ones (a boolean mask: those that took part)."""

    eligible = np.asarray(eligible, dtype=bool)
    scores, present = np.asarray(scores, dtype=np.float64)[eligible], np.asarray(present, dtype=bool)[eligible]
    tables = _tables(scores, present)
    tied = int(tables.sum())
    off_present, off_absent = int(tables[0, 0].sum()), int(tables[1, 0].sum())
    informative = (tables.sum(axis=0).min(axis=0) > 0) & (tables.sum(axis=1).min(axis=0) > 0)
    pvalue = 1.0  # no group with both secrets and both off and on canaries: nothing to test
    if informative.any():
        each = [stats.fisher_exact(tables[:, :, g]).pvalue for g in np.flatnonzero(informative)]
        pvalue = float(stats.combine_pvalues(each, method="fisher").pvalue)  # one group: its own p-value
    return FloatChannel("flagged" if pvalue < LEVEL else "cleared", pvalue, off_present, off_absent, tied)
