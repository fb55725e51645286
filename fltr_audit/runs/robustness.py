"""The robustness settings of one training at the doors (``train``, ``audit``, the Python API): the
poisoning parsed and checked against the algorithm's messages, the defense's robust rule checked against
the cohort, and both made ready for the run (a fresh attack from the run's seed, the stack bound to
the run: fltrust's root set, FOLtR-ES's message decoder)."""

from __future__ import annotations

from typing import Any

from defenses.robust.binding import bind_run
from defenses.robust.compose import check_cohort
from fltr_audit.engine.algorithms.registry import algorithm_spec
from fltr_audit.spec.poison import PoisonSpec, parse_poison

POISON_HELP = ("Malicious clients of every training cohort: none | NAME(fraction=F,...) with NAME one of data-poison, "
               "sign-flip, scale, noise, lie, ipm, adaptive (`fltr-audit attacks list`), F in [0, 0.5).")


def check_robustness(poison: str | None, algorithm: str, stack: Any, clients: int) -> PoisonSpec | None:
    """The poisoning of ``poison`` (None for none) once it is known that ``algorithm``'s messages carry
    it (ParameterError naming ``poison``), and that the stack's robust rule fits cohorts of ``clients``
    (FltrError naming the stack); checked before any data is loaded."""
    spec = parse_poison(poison)
    if spec is not None:
        declared = algorithm_spec(algorithm)
        spec.check_applies(algorithm, declared.message_kind, declared.user_clicks)
    check_cohort(stack, clients)
    return spec


def prepared(spec: PoisonSpec | None, stack: Any, algorithm: Any, data: Any, queries_per_client: int,
             seed: int) -> tuple[Any, Any]:
    """The run's fresh poisoning attack (None without one) and its stack bound to the run."""
    poisoning = None if spec is None else spec.build(seed=seed, n_levels=data.n_levels)
    return poisoning, bind_run(stack, algorithm, data, queries_per_client, seed)
