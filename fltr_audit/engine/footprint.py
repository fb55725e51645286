"""What a run's sizes cost in memory, estimated from what the engine allocates for them, checked
against the machine before anything is allocated (``fltr_audit.base.resources.check_memory``): a size
the machine cannot hold is one ``ParameterError`` naming the parameter (``population``,
``probe.counterfactual``), which each door renames to what its user typed.

The figures per element are the engine's own, measured (peak RSS, tracemalloc) and rounded up;
whoever changes what the population or the counterfactual baseline allocates changes them here.
"""

from __future__ import annotations

from fltr_audit.base.resources import check_memory

POPULATION_BYTES_PER_USER = 16
"""A run with a population of N users holds, per user, its visit count (``federation.train``, int64)
and its realized participations (``cohorts.participation_counts``, int64, with the copy the
accounting's quantile takes): measured 9-11 bytes per user at the peak of ``train``, ``audit-run``."""
WEIGHTED_COHORT_BYTES_PER_USER = 16
"""``data-quantity``: each round's Efraimidis-Spirakis keys over the whole population (float64) and
their ``argpartition`` (int64); measured 16.6 bytes per user beside the above."""
COUNTERFACTUAL_BYTES_PER_DRAW = 40
"""Per counterfactual draw and shown slot of a probe round: the redrawn clicks and the scoring's
temporaries (``attacks.scoring.evaluate``: clicks masked, ranks times clicks); measured 34 bytes."""


def population_bytes(population: int, setting: str = "iid") -> int:
    """Bytes a run of ``population`` users holds for them under the non-IID ``setting``
    (``population.NonIID.setting``)."""
    per_user = POPULATION_BYTES_PER_USER
    if setting == "data-quantity":
        per_user += WEIGHTED_COHORT_BYTES_PER_USER
    return int(population) * per_user


def check_population_memory(population: int | None, setting: str = "iid") -> None:
    """ParameterError naming ``population`` when a population of that many users does not fit in
    this machine's memory (None: no population, nothing to check), under the non-IID ``setting``.
    A door calls it once both are parsed; ``federation.train`` and the accounting call it too."""
    if population is not None:
        check_memory("population", population_bytes(population, setting), f"a population of {population:,} users")


def check_counterfactual_memory(draws: int, slots: int) -> None:
    """ParameterError naming ``probe.counterfactual`` when ``draws`` counterfactual click vectors
    of ``slots`` shown slots (one probe round's, or every round's: lists times k) do not fit in
    this machine's memory."""
    check_memory("probe.counterfactual", int(draws) * int(slots) * COUNTERFACTUAL_BYTES_PER_DRAW,
                 f"{draws:,} counterfactual click vectors of {slots:,} shown slots")
