"""Worst-case cohorts for a noisy aggregator that combines the clipped updates by a robust rule
(``AggregatorGaussian.combine`` is not ``mean``: ``defenses.robust.compose``).

The mean's sensitivity to one user does not depend on the others, so the worst-case audit holds
them at zero; a robust rule's does. Its worst case puts the other ``n - 1`` members in two equal
clusters at the two (clipped) inputs, so that the target's input decides which cluster is the
majority: Krum then selects a member of that cluster, the coordinate-wise median moves from one to
the other, Multi-Krum averages a different set, and the trimmed mean moves by ``C / (n - 2 floor(beta n))``
instead of ``C / n``. The released outputs on the two inputs then lie a clip ``C`` apart under
noise calibrated for ``C / n``: a claim that counted on the mean is violated, which the audit can
see; a rule whose output moves no more than the mean's (``norm-bound`` under the same clip) keeps it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attacks.stack_outputs import clipped
from fltr_audit.privacy import mechanisms as mech


def rule_combined(stack: Any) -> bool:
    """Whether the stack's aggregator declares noise on a robust rule's combination."""
    declared = mech.declared(stack.aggregator)
    return isinstance(declared, mech.AggregatorGaussian) and declared.combine != "mean"


def split_cohort(inputs: tuple[np.ndarray, np.ndarray], cohort: int, clip: float) -> np.ndarray:
    """The other ``cohort - 1`` members' updates, (cohort - 1, P): the first ``ceil((cohort - 1) / 2)``
    at the clipped input 0, the rest at the clipped input 1."""
    c0 = clipped(np.asarray(inputs[0], dtype=np.float64), clip)
    c1 = clipped(np.asarray(inputs[1], dtype=np.float64), clip)
    others = np.empty((int(cohort) - 1, len(c0)))
    half = (int(cohort) - 1 + 1) // 2
    others[:half], others[half:] = c0, c1
    return others


def worst_case_others(stack: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int) -> np.ndarray | None:
    """The others of a worst-case audit of the stack's noisy aggregator: ``split_cohort`` when it
    combines by a robust rule, None (zero updates) for the mean."""
    if not rule_combined(stack):
        return None
    return split_cohort(inputs, cohort, mech.declared(stack.aggregator).clip)
