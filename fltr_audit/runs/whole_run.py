"""The privacy a user spends over a whole training run, audited in one run with canaries
(``attacks.canaries``, ``attacks.whole_run_bounds``) beside the accounted epsilon
(``defenses.accounting``), and over R independent runs: the logic of ``fltr-audit audit-run``
(``fltr_audit.cli.audit_run``), ``fltr_audit.audit_whole_run`` and a campaign's
``[audit_run]`` section (``whole_run_audit``, called by ``fltr_audit.runs.executors`` for each run).
Part of the composition root.

Per run (seed s, s + 1, ...): the canaries' design for the stack (aggregate scope when the
aggregator hides the messages, message scope otherwise), training with the canary observer (the
trained model is the one a run without canaries gives), then the scores. The figures: the one-run
lower bound and the one-run estimate of the first run; the multi-run lower bound from one canary
of each run (``runs`` >= 2); the epsilon accounted over the run for the canaries' own
participations (against the server, no amplification -- the figure the Steinke bound is compared
with) and the population's (server: worst user; observer of the released models: amplified); the
f-DP one-run bounds (``attacks.fdp_one_run``) over the canaries of the most frequent participation
count (``fdp_pool``) and, for a Gaussian declared mechanism, the claim as mu-GDP over that count
(``claimed_mu``), which then decides the verdict.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from attacks.canaries import CanaryObserver, design
from defenses.randomized_response import MAXRR_VALUES
from fltr_audit.engine import metrics
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.federation import train
from fltr_audit.engine.population import parse_non_iid
from fltr_audit.engine.training import TrainHooks, TrainSettings
from fltr_audit.errors import FltrError
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.runs.epsilon_audits import hides_messages
from fltr_audit.runs.executors import SERIAL, Executor, Task
from fltr_audit.runs.models import splits_of
from fltr_audit.runs.noise_model import noise_model
from fltr_audit.runs.robustness import prepared
from fltr_audit.runs.whole_run_figures import whole_run_figures
from fltr_audit.spec.run import RunSpec, content_key
from fltr_audit.spec.whole_run import CanaryOptions, canary_problem, check_canaries
from fltr_audit.store.records import RunAuditRecord as RunAudit
from fltr_audit.runs.progress import NO_PROGRESS, Progress

def audit_run_config(spec: RunSpec, options: CanaryOptions) -> dict:
    """The run config of a whole-run audit, as stored (``run_audits``): everything it depends on.
    Its ``content_key`` is the audit's ``audit_key`` (equal only for bit-identical audits)."""
    algo, data = spec.algorithm, spec.data
    return {"command": "audit-run", "algorithm": algo.name, "defense": spec.defense.name,
            "canaries": options.canaries, "runs": options.runs, "data": data.spec, "fold": data.fold,
            "rounds": algo.rounds, "clients": algo.clients, "population": algo.population,
            "queries_per_client": algo.queries_per_client, "click_model": algo.train_click_model,
            "seed": spec.seed, "ranker": algo.ranker, "params": [list(p) for p in algo.params],
            "non_iid": algo.non_iid, "confidence": options.confidence, "claim_verdict": options.require_claim,
            **({"normalization": data.normalization} if data.normalization != "none" else {}),
            **({"queries": data.queries} if data.queries is not None else {}),
            **({"poison": algo.poison.text} if algo.poison is not None else {})}


def canary_design(stack: Any, spec: RunSpec, options: CanaryOptions, dim: int, metric: bool = False) -> Any:
    """The canaries that fit ``stack`` (``attacks.canaries.design``): canary clients at the
    aggregator's clip when it hides the messages, canary users at the noise mechanism's clip radius
    otherwise, tested by its likelihood ratio; canary users of one query's click for ``metric``
    messages (FOLtR-ES). Drawn from the run's seed."""

    algo = spec.algorithm
    aggregation = mech.declared(stack.aggregator)
    problem = canary_problem(algo.name, stack)
    if problem:
        raise FltrError(problem)
    users = algo.population or algo.clients
    common = dict(m=options.canaries, dim=dim, rounds=algo.rounds, rate=algo.clients / users, seed=spec.seed,
                  population=users)
    if metric:
        model = noise_model(stack)
        return design("message", radius=None, test="metric", values=model.values or MAXRR_VALUES, **common)
    if hides_messages(stack, dim):
        if isinstance(aggregation, (mech.AggregatorGaussian, mech.DiscreteGaussianSum)):
            return design("aggregate", radius=aggregation.clip, weighting="count", reference="clipped-sum", **common)
        clips = noise_model(stack).clips
        last = clips[-1] if clips else None
        return design("aggregate", radius=last.bound if last else None,
                      relative_to=last.of if last else "update", **common)
    model = noise_model(stack)
    last = model.clips[-1] if model.clips else None
    return design("message", radius=last.bound if last else None, relative_to=last.of if last else "update",
                  test="laplace" if model.kind == "laplace" else "projection", noise_scale=model.scale or 1.0,
                  axes=bool(last and last.norm == "l1"), **common)


@dataclass(frozen=True)
class CanaryRun:
    """One training with canaries: each canary's score, presence and participations, the scope
    of the design, the model's nDCG@10 and the training's seconds."""

    scores: np.ndarray
    present: np.ndarray
    participations: np.ndarray
    scope: str
    ndcg10: float
    seconds: float


def canary_run(task: tuple[RunSpec, CanaryOptions, int]) -> CanaryRun:
    """Training ``i`` of the audit of ``spec`` (seed ``spec.seed + i``, on the data of ``spec``'s
    seed, a fresh defense stack) with the canaries of its design read by their observer; the
    trained model is the one a run without canaries gives."""

    spec, options, i = task
    algo, seed = spec.algorithm, spec.seed + i
    splits = splits_of(spec)
    stack = spec.defense.build()  # fresh: aggregators may keep state across rounds
    settings = {"ranker": algo.ranker, "seed": seed, "clients": algo.clients,
                "queries_per_client": algo.queries_per_client, "params": algo.kwargs()}
    algorithm = algorithms.build(algo.name, splits, algo.train_click_model, settings)
    kind = algorithms.algorithm_spec(algo.name).message_kind
    dim = algorithm.init_params(np.random.default_rng(0)).shape[0]
    plan = canary_design(stack, dataclasses.replace(spec, seed=seed), options, dim, metric=kind == "seed+metric")
    observer = CanaryObserver(plan)
    poisoning, stack = prepared(algo.poison, stack, algorithm, splits.train, algo.queries_per_client, seed)
    start = time.perf_counter()
    replace = algo.population is None and algo.clients * algo.queries_per_client > splits.train.n_queries
    result = train(algorithm, splits.train,
                   TrainSettings(clients=algo.clients, queries_per_client=algo.queries_per_client, rounds=algo.rounds,
                                 seed=seed, replace=replace, population=algo.population,
                                 non_iid=parse_non_iid(algo.non_iid)),
                   defenses=stack, hooks=TrainHooks(observer=observer), poisoning=poisoning)
    seconds = time.perf_counter() - start
    ndcg = float(metrics.mean_ndcg(algorithm.ranker.score(result.params, splits.test.features), splits.test, 10))
    return CanaryRun(observer.scores(), plan.present, plan.participations, plan.scope, ndcg, seconds)


def whole_run_audit(spec: RunSpec, options: CanaryOptions, executor: Executor = SERIAL,
                    progress: Progress = NO_PROGRESS) -> RunAudit:
    """Audit the privacy a user spends over the run ``spec`` with canaries (module docstring): the
    ``options.runs`` trainings (seeds ``spec.seed``, ``spec.seed + 1``, ...) on the ``executor``
    (the same figures on every executor; ``progress`` advanced per training), then every figure
    (``runs.whole_run_figures``)."""
    check_canaries(spec, options)
    tasks = [Task(str(i), (spec, options, i)) for i in range(options.runs)]
    runs = executor.results(canary_run, tasks, progress)
    return whole_run_figures(spec, options, runs, audit_key=content_key(audit_run_config(spec, options)))
