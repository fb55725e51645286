"""What one training run is, as a value: ``TrainSettings`` (the cohort, its queries, the rounds,
the seed, the population and its non-IID setting, the threat model, how often to evaluate) and
``TrainHooks`` (what reads the run as it goes). ``federation.train`` takes both."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from fltr_audit.constraints import Interval, ParameterError, check
from fltr_audit.engine.footprint import check_population_memory
from fltr_audit.engine.interfaces import Interceptor
from fltr_audit.engine.messages import THREAT_MODELS
from fltr_audit.engine.population import NonIID
from fltr_audit.engine.round_parts import RoundParts

BUDGET_LIMITS = {"clients": 1_000_000, "queries_per_client": 10_000, "rounds": 1_000_000, "eval_every": 1_000_000}
"""Largest accepted sizes (checked before anything is allocated)."""


def check_threat_model(threat_model: str) -> None:
    if threat_model not in THREAT_MODELS:
        raise ParameterError("threat_model", f"unknown threat model {threat_model!r} "
                                             f"(choose from {', '.join(THREAT_MODELS)})")


def check_population(population: int | None, clients: int, non_iid: NonIID | None = None) -> None:
    """ParameterError naming ``population`` below the cohort, or beyond this machine's memory."""
    check("population", population, (Interval(int, clients, None), None),
          f"the cohort of {clients} clients is sampled from it each round")
    check_population_memory(population, non_iid.setting if non_iid is not None else "iid")


def check_budget(clients: int, queries_per_client: int, rounds: int, eval_every: int) -> None:
    for name, value in (("clients", clients), ("queries_per_client", queries_per_client),
                        ("rounds", rounds), ("eval_every", eval_every)):
        check(name, value, (Interval(int, 1, BUDGET_LIMITS[name]),))


@dataclass(frozen=True)
class TrainSettings:
    """One training run: ``rounds`` rounds of ``clients`` clients x ``queries_per_client`` queries.

    Without a ``population`` the same ``clients`` users take part in every round (FPDGD Alg. 2);
    with one, each round's cohort is drawn from N persistent users (``engine.schedule``).
    ``replace`` draws a round's queries with replacement (needed when a round asks for more
    queries than the split has). Offline nDCG@10 is computed after rounds ``eval_every``,
    ``2 eval_every``, ... and the last. Checked when built (ParameterError naming the setting)."""

    clients: int
    queries_per_client: int
    rounds: int
    seed: int
    eval_every: int = 1
    population: int | None = None
    non_iid: NonIID = field(default_factory=NonIID)
    replace: bool = False
    threat_model: str = "server"

    def __post_init__(self) -> None:
        check_budget(self.clients, self.queries_per_client, self.rounds, self.eval_every)
        check_threat_model(self.threat_model)
        check_population(self.population, self.clients, self.non_iid)

    @property
    def users(self) -> int:
        """How many distinct users can take part: the population, else the cohort."""
        return self.population or self.clients


@dataclass(frozen=True)
class TrainHooks:
    """What reads a training run as it goes, changing nothing: ``interceptors`` get every
    ``RoundBatch``; ``observer`` every round's parts (``engine.round_parts``); ``on_round(r, row)``
    each curve row in order once its offline nDCG is known; ``evaluators`` add a curve column each
    (name -> function of the global model), computed on evaluated rounds."""

    interceptors: Sequence[Interceptor] = ()
    observer: Callable[[RoundParts], None] | None = None
    on_round: Callable[[int, dict], None] | None = None
    evaluators: Mapping[str, Callable[[np.ndarray], float]] = field(default_factory=dict)


NO_HOOKS = TrainHooks()

