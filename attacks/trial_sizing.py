"""``--trials auto``: the trials per input an epsilon audit runs, sized to the claim."""

from __future__ import annotations

import math

from fltr_audit.constraints import ParameterError
from fltr_audit.privacy.claim_trials import trials_to_test

AUTO_TRIALS_CAP = 1_000_000
"""``--trials auto`` never sizes an audit beyond this many trials per input (and says so)."""
AUTO_MARGIN = 4
"""``--trials auto`` runs this many times the trials whose ceiling just reaches the claim
(the ceiling then lies about ln 4 above it)."""


def auto_trials(claimed_epsilon: float, delta: float = 0.0, confidence: float = 0.95,
                floor: int = 10_000) -> tuple[int, bool]:
    """``--trials auto``: ``AUTO_MARGIN`` times the trials that can test the claim (at least
    ``floor``), at most ``AUTO_TRIALS_CAP``; and whether the cap cut it (ParameterError for a
    defense that claims no epsilon: there is nothing to size the trials by)."""
    if not math.isfinite(claimed_epsilon):
        raise ParameterError("trials", "auto: the defense claims no epsilon, so there is nothing to size the trials "
                                       "by; give a number of trials")
    wanted = max(floor, AUTO_MARGIN * trials_to_test(claimed_epsilon, delta, confidence))
    return min(wanted, AUTO_TRIALS_CAP), wanted > AUTO_TRIALS_CAP
