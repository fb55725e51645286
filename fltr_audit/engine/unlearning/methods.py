"""The unlearning methods as one call (``unlearn``): what each needs the server to keep during
training (``kept_by``), and the model it gives without the forgotten users, with its cost in
client steps and seconds (the package docstring lists the methods)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from fltr_audit.constraints import Interval, Options, check
from fltr_audit.engine.aggregation import RoundDefenses
from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.federation import train
from fltr_audit.engine.population import with_population_clicks
from fltr_audit.engine.messages import RoundBatch
from fltr_audit.engine.training import TrainHooks, TrainSettings
from fltr_audit.engine.unlearning import METHODS
from fltr_audit.engine.unlearning.federaser import federaser
from fltr_audit.engine.unlearning.history import ServerHistory, kept_rounds
from fltr_audit.engine.unlearning.pga import pga
from fltr_audit.engine.unlearning.rounds import continue_rounds


@dataclass(frozen=True)
class Forgetting:
    """One unlearning request: the ``method``, the ``forgotten`` users, FedEraser's ``interval``
    (Delta t, rounds between kept updates) and calibration ``ratio`` (of the B queries), and the
    ``rounds`` of ``finetune`` (and of each phase of ``pga``). Checked when built."""

    method: str
    forgotten: tuple[int, ...]
    interval: int = 5
    ratio: float = 0.5
    rounds: int = 10

    def __post_init__(self) -> None:
        check("method", self.method, (Options(METHODS),))
        check("interval", self.interval, (Interval(int, 1, None),))
        check("calibration", self.ratio, (Interval(float, 0, 1, "right"),))
        check("unlearn_rounds", self.rounds, (Interval(int, 1, None),))
        object.__setattr__(self, "forgotten", tuple(sorted({int(u) for u in self.forgotten})))


def kept_by(forgetting: Forgetting, rounds: int) -> tuple[int, ...]:
    """The training rounds whose updates the server keeps for ``forgetting.method``: FedEraser every
    ``interval`` rounds from the first, PGA the last (its reference model), the others none."""
    if forgetting.method == "federaser":
        return kept_rounds(rounds, forgetting.interval)
    return (rounds,) if forgetting.method == "pga" else ()


class StepCounter:
    """An interceptor counting the client steps of a training (one per participant and round)."""

    def __init__(self) -> None:
        self.steps = 0

    def __call__(self, batch: RoundBatch) -> None:
        self.steps += len(batch.view.participants)


@dataclass(frozen=True)
class Unlearned:
    """The model after unlearning, the client steps it took (one client's local step in one round)
    and the seconds it took."""

    params: np.ndarray
    client_steps: int
    seconds: float


def unlearn(algorithm: Any, data: Dataset, settings: TrainSettings, before: np.ndarray, history: ServerHistory,
            forgetting: Forgetting, defenses: RoundDefenses, poisoning: Any = None) -> Unlearned:
    """Forget ``forgetting.forgotten`` from the federation trained as ``settings`` say into
    ``before``, the server having kept ``history`` (``kept_by``). Unlearning rounds continue the
    round count after training. ``defenses``: a fresh stack for the unlearning rounds; ``poisoning``
    (``engine.poisoning``) the training's, whose malicious users keep their ways in every round they
    take part in (FedEraser's calibration steps are the remaining users' only)."""
    start = time.perf_counter()
    forgotten = np.asarray(forgetting.forgotten, dtype=np.int64)
    absent = np.union1d(np.asarray(settings.absent, dtype=np.int64), forgotten)
    first, method = settings.rounds + 1, forgetting.method
    if method == "retrain":
        counted = StepCounter()
        result = train(algorithm, data, dataclasses.replace(settings, absent=tuple(absent.tolist())),
                       defenses=defenses, hooks=TrainHooks(interceptors=(counted,)), poisoning=poisoning)
        params, steps = result.params, counted.steps
    elif method == "none":
        params, steps = np.array(before, dtype=np.float64), 0
    else:
        alg = with_population_clicks(algorithm, settings.non_iid, settings.seed)
        if method == "finetune":
            params, steps = continue_rounds(alg, before, data, settings, first=first, count=forgetting.rounds,
                                            defenses=defenses, absent=absent, poisoning=poisoning)
        elif method == "federaser":
            params, steps = federaser(alg, data, settings, history, forgotten, ratio=forgetting.ratio,
                                      defenses=defenses, first_round=first)
        else:
            last = history.ordered()[-1] if history.stored else None
            params, steps = pga(alg, data, settings, before, last, forgotten, rounds=forgetting.rounds,
                                defenses=defenses, first_round=first, absent=absent, poisoning=poisoning)
    return Unlearned(np.asarray(params, dtype=np.float64), steps, time.perf_counter() - start)
