"""``fltr_audit.epsilon_table``: the exact worst-case epsilon of FOLtR-ES's privatized MaxRR (FOLtR-ES
Eq. 9, by enumeration) beside the bound of Eq. 10 -- the ``fltr-audit epsilon`` command."""

from __future__ import annotations

from typing import Sequence

from attacks.epsilon import maxrr_epsilon
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.clicks import CCM_TABLES

CLICK_MODELS = ("perfect", "navigational", "informational")
P_VALUES = (0.25, 0.5, 0.75, 0.9, 0.95, 0.99)


def epsilon_table(click_models: Sequence[str] = CLICK_MODELS, p: Sequence[float] = P_VALUES, length: int = 10,
                  levels: int = 3) -> list[dict]:
    """One record per click model x p: the worst-case epsilon over all pairs of relevance
    placements and all transmitted values, the Eq. 10 bound, and the placements that attain it."""
    known_levels = sorted({lv for _, lv in CCM_TABLES})
    if levels not in known_levels:
        raise ParameterError("levels", f"must be one of {', '.join(map(str, known_levels))} (the click model "
                                       f"tables), got {levels}")
    known = tuple(sorted({m for m, _ in CCM_TABLES}))
    for model in click_models:
        if model not in known:
            raise ParameterError("click_model", f"unknown value {model!r} (choose from {', '.join(known)})")
    return [maxrr_epsilon(m, float(q), length, levels).as_dict() for m in click_models for q in p]
