"""Forgetting audited in one run (issue 41; ``fltr-audit audit-unlearning``,
``fltr_audit.audit_unlearning``, a campaign's ``[unlearning]`` table): the trainings and unlearnings
of one audit, fanned out on an ``Executor`` (``unlearning_task``), then its figures
(``runs.unlearning_figures``). Part of the composition root.

The canaries of the audit (``attacks.unlearning_canaries``) and the other users to forget are drawn
from the audit's own stream (``audit_seed``: the key of everything the audit depends on); training,
its cohorts and clicks from the run's seed. Three tasks, each from scratch in its process:

* ``retrain`` -- the federation trained without the forgotten users and without any canary: the
  reference model, independent of every secret (its cost is the one the methods are compared with);
* ``clean`` -- the federation with its canaries (the excluded ones absent), the server keeping what
  the method needs (``engine.unlearning.history``), then the method forgetting the ``forget`` users
  and the included canaries; click recovery from what unlearning showed (``runs.unlearning_leakage``);
* ``poison`` (``poison_check``) -- the same with the ``forget`` users poisoning it by ``data-poison``
  (inverted clicks, ``attacks.forgotten_poisoners``) whenever they take part, in the unlearning's
  rounds too: the ECIR 2024 check that forgetting them removes their effect. Its retrain is the clean
  one (the poisoners are among the forgotten).
"""

from __future__ import annotations

import dataclasses
import tracemalloc
from dataclasses import dataclass
from typing import Any

import numpy as np

from attacks.forgotten_poisoners import ForgottenPoisoners
from attacks.unlearning_canaries import UnlearningCanaries, canary_clients, design
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.federation import train
from fltr_audit.engine.population import parse_non_iid
from fltr_audit.engine.schedule import RoundSchedule
from fltr_audit.engine.training import TrainHooks, TrainSettings
from fltr_audit.engine.unlearning.history import ServerHistory
from fltr_audit.engine.unlearning.methods import Forgetting, Unlearned, kept_by, unlearn
from fltr_audit.runs.executors import SERIAL, Executor, Task
from fltr_audit.runs.models import splits_of
from fltr_audit.runs.unlearning_figures import unlearning_figures
from fltr_audit.runs.unlearning_leakage import DIFFERENCE, KEPT, ForgottenRounds, difference_batches, leakage_verdict
from fltr_audit.spec.run import RunSpec, content_key
from fltr_audit.spec.unlearning import UnlearningOptions, check_unlearning
from fltr_audit.store.records import UnlearningAuditRecord


def unlearning_config(spec: RunSpec, options: UnlearningOptions) -> dict:
    """Everything the audit depends on, as stored (``unlearning_audits``); its ``content_key`` is the audit key."""
    algo, data, o = spec.algorithm, spec.data, options
    return {"command": "audit-unlearning", "algorithm": algo.name, "method": o.method, "forget": o.forget,
            "canaries": o.canaries, "interval": o.interval, "calibration": o.calibration,
            "unlearn_rounds": o.rounds_for(algo.rounds), "scale": o.scale, "poison_check": o.poison_check,
            "confidence": o.confidence, "defense": spec.defense.name, "data": data.spec, "fold": data.fold,
            "normalization": data.normalization, "rounds": algo.rounds, "clients": algo.clients,
            "population": algo.population, "queries_per_client": algo.queries_per_client,
            "click_model": algo.train_click_model, "seed": spec.seed, "ranker": algo.ranker,
            "params": [list(p) for p in algo.params], "non_iid": algo.non_iid,
            **({"queries": data.queries} if data.queries is not None else {})}


@dataclass(frozen=True)
class Federation:
    """What every task of an audit shares, rebuilt in each process: the data, the algorithm, the
    canaries, the training's settings (excluded canaries absent) and the forgetting request."""

    splits: Any
    algorithm: Any
    plan: UnlearningCanaries
    others: np.ndarray
    settings: TrainSettings
    forgetting: Forgetting


def federation(spec: RunSpec, options: UnlearningOptions) -> Federation:
    """The shared part of the tasks of the audit of ``spec`` (module docstring)."""
    algo = spec.algorithm
    splits = splits_of(spec)
    algorithm = algorithms.build(algo.name, splits, algo.train_click_model,
                                 {"ranker": algo.ranker, "seed": spec.seed, "clients": algo.clients,
                                  "queries_per_client": algo.queries_per_client, "params": algo.kwargs()})
    dim = algorithm.init_params(np.random.default_rng(0)).shape[0]
    users = algo.population or algo.clients
    seed = int(content_key(unlearning_config(spec, options)), 16) >> 1  # the audit's stream: 63 bits, a valid seed
    plan, others = design(users, options.canaries, options.forget, dim, seed, options.scale)
    replace = algo.population is None and algo.clients * algo.queries_per_client > splits.train.n_queries
    settings = TrainSettings(clients=algo.clients, queries_per_client=algo.queries_per_client, rounds=algo.rounds,
                             seed=spec.seed, eval_every=algo.rounds, population=algo.population,
                             non_iid=parse_non_iid(algo.non_iid), replace=replace,
                             absent=tuple(plan.excluded.tolist()))
    forgotten = np.union1d(others, plan.included)
    forgetting = Forgetting(options.method, tuple(forgotten.tolist()), interval=options.interval,
                            ratio=options.calibration, rounds=options.rounds_for(algo.rounds))
    return Federation(splits, algorithm, plan, others, settings, forgetting)


def scheduled(fed: Federation) -> np.ndarray:
    """How often the schedule drew each canary, included or not (from the seed alone; the eligible
    canaries are those drawn at least once)."""
    settings = dataclasses.replace(fed.settings, absent=())
    schedule, counts = RoundSchedule(settings, fed.splits.train), np.zeros(len(fed.plan.ids), dtype=np.int64)
    for r in range(1, settings.rounds + 1):
        _, which = fed.plan.rows(schedule.next_round(r)[0])
        counts[which] += 1
    return counts


def measured_unlearn(algorithm: Any, data: Any, settings: TrainSettings, *rest: Any) -> tuple[Unlearned, int]:
    """``engine.unlearning.unlearn`` timed after a one-round warm-up training (the compiled kernels
    loaded, so no method pays for it), and the peak bytes it allocates, from a second, traced pass
    (tracemalloc slows allocation-heavy code several times over; both passes compute the same model)."""
    train(algorithm, data, dataclasses.replace(settings, rounds=1))
    done = unlearn(algorithm, data, settings, *rest)
    tracemalloc.start()
    try:
        unlearn(algorithm, data, settings, *rest)
        return done, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@dataclass(frozen=True)
class TaskResult:
    """One task's models and costs: ``before`` (None for retrain), ``after``, the unlearning's cost,
    the bytes the server kept, the leakage verdicts of the difference and of the kept updates."""

    before: np.ndarray | None
    after: np.ndarray
    unlearned: Unlearned
    peak_bytes: int
    stored_bytes: int = 0
    difference: Any = None
    kept: Any = None


def unlearning_task(task: tuple[RunSpec, UnlearningOptions, str]) -> TaskResult:
    """One task of the audit (module docstring): ``retrain``, ``clean`` or ``poison``."""
    spec, options, kind = task
    fed = federation(spec, options)
    data = fed.splits.train
    if kind == "retrain":
        done, peak = measured_unlearn(canary_clients(fed.algorithm, fed.plan), data, fed.settings, None,
                                      ServerHistory(()), Forgetting("retrain", fed.forgetting.forgotten),
                                      spec.defense.build())
        return TaskResult(None, done.params, done, peak)
    poisoning = ForgottenPoisoners(fed.others, data.n_levels, seed=spec.seed) if kind == "poison" else None
    algorithm = canary_clients(fed.algorithm, fed.plan)
    kept = kept_by(fed.forgetting, fed.settings.rounds)
    history, record = ServerHistory(kept), ForgottenRounds(fed.others, frozenset(kept))
    before = train(algorithm, data, fed.settings, defenses=spec.defense.build(), poisoning=poisoning,
                   hooks=TrainHooks(interceptors=(history, record) if kind == "clean" else (history,))).params
    done, peak = measured_unlearn(algorithm, data, fed.settings, before, history, fed.forgetting,
                                  spec.defense.build(), poisoning)
    if kind == "poison":
        return TaskResult(before, done.params, done, peak, history.nbytes)
    stack = spec.defense.build()
    message_kind = algorithms.algorithm_spec(spec.algorithm.name).message_kind
    batches = difference_batches(record, before, done.params, fed.algorithm, data, message_kind)
    difference = leakage_verdict(spec, fed.algorithm, stack, batches, data, DIFFERENCE)
    kept_leak = leakage_verdict(spec, fed.algorithm, stack, record.batches, data, KEPT)
    return TaskResult(before, done.params, done, peak, history.nbytes, difference, kept_leak)


def unlearning_audit(spec: RunSpec, options: UnlearningOptions, executor: Executor = SERIAL
                     ) -> UnlearningAuditRecord:
    """Audit the forgetting of ``options.method`` on the run ``spec`` (module docstring); the same
    figures on every executor."""

    check_unlearning(spec, options)
    kinds = ["retrain", "clean"] + (["poison"] if options.poison_check else [])
    results = executor.results(unlearning_task, [Task(k, (spec, options, k)) for k in kinds])
    fed = federation(spec, options)
    return unlearning_figures(spec, options, fed, scheduled(fed), dict(zip(kinds, results)),
                              audit_key=content_key(unlearning_config(spec, options)))
