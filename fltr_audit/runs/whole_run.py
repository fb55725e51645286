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

import math
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from fltr_audit.constraints import OPEN_UNIT, POSITIVE_INT, Interval, ParameterError, check
from fltr_audit.errors import FltrError
from fltr_audit.store.records import RunAuditRecord as RunAudit
from fltr_audit.spec.run import MAX_CANARIES, MAX_CANARY_RUNS, RunSpec

RUNS_CAP = MAX_CANARY_RUNS
CANARIES_CAP = MAX_CANARIES
MESSAGE_KINDS = ("weights", "update", "seed+metric")
"""The message kinds canaries ride on (vector messages, FOLtR-ES metrics)."""


@dataclass(frozen=True)
class RunAuditOptions:
    """What ``audit-run`` runs (CLI options, a campaign row or Python keywords alike)."""

    algorithm: str
    defense: str = "none"
    canaries: int = 200
    runs: int = 1
    data: str = "synthetic:mq2008"
    fold: int = 1
    rounds: int = 100
    clients: int = 1000
    population: Optional[int] = None
    queries_per_client: int = 4
    click_model: str = "perfect"
    seed: int = 0
    ranker: str = "linear"
    params: tuple[tuple[str, Any], ...] = ()
    non_iid: str = "iid"
    confidence: float = 0.95
    claim_verdict: bool = False
    poison: str = "none"
    """Malicious clients of every training cohort (``fltr_audit.spec.poison``): the canaries' privacy
    in a federation under attack."""

    def check(self) -> None:
        """Bad input, before anything is loaded or trained: one ``FltrError`` naming the option."""
        from defenses.stack import parse_defense
        from fltr_audit.engine.federation import check_budget

        check_budget(self.clients, self.queries_per_client, self.rounds, 1)
        users = self.population or self.clients
        check("canaries", self.canaries, (Interval(int, 1, min(users, CANARIES_CAP)),),
              f"the canaries of the audit, at most one per user of the population of {users:,}" if users < CANARIES_CAP
              else "the canaries of the audit")
        check("runs", self.runs, (Interval(int, 1, RUNS_CAP),), "independent trainings")
        if self.population is not None:
            check("population", self.population, (Interval(int, self.clients, None),),
                  f"at least the cohort of {self.clients:,} clients")
        check("confidence", self.confidence, OPEN_UNIT)
        stack = parse_defense(self.defense)
        problem = canary_problem(self.algorithm, stack)
        if problem:
            raise FltrError(problem)
        from fltr_audit.runs.robustness import check_robustness

        check_robustness(self.poison, self.algorithm, stack, self.clients)
        if self.claim_verdict and stack.claim.epsilon == float("inf"):
            raise ParameterError("claim_verdict", f"defense {stack.name!r} claims no epsilon, so there is no claim "
                                 "to give a verdict on (leave it off for the bounds alone)")


def canary_problem(algorithm: str, stack: Any) -> str | None:
    """Why canaries cannot ride on ``algorithm`` under ``stack`` (None when they can), naming the
    option: an algorithm that sends no messages, a shuffler (the canary users' messages lose their
    senders), an aggregator that declares an adaptive clip (canary clients are scaled to a fixed
    one) -- read from the algorithm's spec and the declared mechanisms, never guessed."""
    from fltr_audit.privacy import mechanisms as mech
    from fltr_audit.engine.algorithms import registry as algorithms

    kind = algorithms.algorithm_spec(algorithm).message_kind
    if kind not in MESSAGE_KINDS:
        return f"audit-run: {algorithm} sends no messages to audit (message kind {kind!r})"
    aggregation = mech.declared(stack.aggregator)
    if isinstance(aggregation, mech.Shuffle):
        return (f"defense {stack.name!r} shuffles the messages; audit-run's canary users need "
                "messages linked to their senders")
    if isinstance(aggregation, mech.AggregatorGaussian) and aggregation.adaptive:
        return (f"defense {stack.name!r} adapts its clip norm (quantile > 0); audit-run scales canary "
                "clients to a fixed clip (quantile=0)")
    return None


def canary_design(stack: Any, options: RunAuditOptions, dim: int, seed: int, metric: bool = False) -> Any:
    """The canaries that fit ``stack`` (``attacks.canaries.design``): canary clients at the
    aggregator's clip when it hides the messages, canary users at the noise mechanism's clip radius
    otherwise, tested by its likelihood ratio; canary users of one query's click for ``metric``
    messages (FOLtR-ES)."""
    from attacks.canaries import design
    from fltr_audit.privacy import mechanisms as mech
    from fltr_audit.runs.audit import hides_messages, noise_model

    aggregation = mech.declared(stack.aggregator)
    problem = canary_problem(options.algorithm, stack)
    if problem:
        raise FltrError(problem)
    rate = options.clients / (options.population or options.clients)
    common = dict(m=options.canaries, dim=dim, rounds=options.rounds, rate=rate, seed=seed,
                  population=options.population or options.clients)
    if metric:
        from defenses.randomized_response import MAXRR_VALUES

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
class _Run:
    scores: np.ndarray
    present: np.ndarray
    participations: np.ndarray
    scope: str
    ndcg10: float
    seconds: float


def _one_run(options: RunAuditOptions, splits: Any, seed: int) -> _Run:
    from attacks.canaries import CanaryObserver
    from defenses.stack import parse_defense
    from fltr_audit.engine import metrics
    from fltr_audit.engine.algorithms import registry as algorithms
    from fltr_audit.engine.federation import train
    from fltr_audit.engine.population import parse_non_iid
    from fltr_audit.runs.robustness import prepared
    from fltr_audit.spec.poison import parse_poison

    stack = parse_defense(options.defense)  # fresh: aggregators may keep state across rounds
    settings = {"ranker": options.ranker, "seed": seed, "clients": options.clients,
                "queries_per_client": options.queries_per_client, "params": dict(options.params)}
    algorithm = algorithms.build(options.algorithm, splits, options.click_model, settings)
    kind = algorithms.algorithm_spec(options.algorithm).message_kind
    dim = algorithm.init_params(np.random.default_rng(0)).shape[0]
    plan = canary_design(stack, options, dim, seed, metric=kind == "seed+metric")
    observer = CanaryObserver(plan)
    poisoning, stack = prepared(parse_poison(options.poison), stack, algorithm, splits.train,
                                options.queries_per_client, seed)
    start = time.perf_counter()
    need = options.clients * options.queries_per_client
    result = train(algorithm, splits.train, clients=options.clients, queries_per_client=options.queries_per_client,
                   rounds=options.rounds, seed=seed, client_defenses=stack.client, aggregator=stack.aggregator,
                   replace=options.population is None and need > splits.train.n_queries,
                   population=options.population, non_iid=parse_non_iid(options.non_iid), observer=observer,
                   poisoning=poisoning)
    seconds = time.perf_counter() - start
    ndcg = float(metrics.mean_ndcg(algorithm.ranker.score(result.params, splits.test.features), splits.test, 10))
    return _Run(observer.scores(), plan.present, plan.participations, plan.scope, ndcg, seconds)


def _runs(options: RunAuditOptions, splits: Any, workers: int) -> list[_Run]:
    """The ``options.runs`` canary runs (seeds ``seed``, ``seed + 1``, ...), in this process or in a
    spawned pool of ``workers`` processes (the splits pickled to them); single-threaded BLAS either
    way, so the figures are the same whatever ``workers`` is (``fltr_audit.runs.executors``)."""
    seeds = [options.seed + i for i in range(options.runs)]
    workers = min(workers, len(seeds))
    if workers <= 1:
        return [_limited_run(options, splits, s) for s in seeds]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_limited_run, [options] * len(seeds), [splits] * len(seeds), seeds))


def _limited_run(options: RunAuditOptions, splits: Any, seed: int) -> _Run:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _one_run(options, splits, seed)


def claimed_mu(stack: Any, participations: int) -> float:
    """The claim as mu-GDP over ``participations`` participations (nan when the declared mechanism
    is not Gaussian): one participation's mu from the declared event -- ``GaussianDpEvent(s)``:
    1 / s (sensitivity over noise std); ``ZCDpEvent(rho, 0)`` (ddgauss): sqrt(2 rho), the Gaussian
    with that zCDP, an approximation for the discrete Gaussian sum -- composed as
    sqrt(participations) mu (Dong, Roth, Su 2022, Cor. 3.3)."""
    import dp_accounting as dpa

    from defenses.accounting import claim_component

    part = claim_component(stack)
    event = part.dp_event() if part is not None else None
    if isinstance(event, dpa.GaussianDpEvent) and event.noise_multiplier > 0:
        per_round = 1.0 / event.noise_multiplier
    elif isinstance(event, dpa.ZCDpEvent) and event.xi == 0.0:
        per_round = math.sqrt(2.0 * event.rho)
    else:
        return math.nan
    return math.sqrt(participations) * per_round


def fdp_pool(participations: np.ndarray) -> tuple[np.ndarray, int]:
    """The canaries the f-DP bound guesses among: those with the most frequent positive number of
    participations (the smallest such number on a tie) -- a choice from the schedule alone, so that
    one mu-GDP claim holds exactly for every canary of the pool; and that number (0: none took part)."""
    counts = np.bincount(np.asarray(participations, dtype=np.int64))
    if len(counts) < 2 or counts[1:].sum() == 0:
        return np.zeros(len(participations), dtype=bool), 0
    n = int(np.argmax(counts[1:])) + 1
    return np.asarray(participations) == n, n


def run_audit_run(options: RunAuditOptions, splits: Any = None, workers: int = 1) -> RunAudit:
    """Train ``options.runs`` runs with canaries and compute every figure (module docstring);
    ``splits``: the data already loaded (a campaign run's), else ``options.data`` unnormalized;
    ``workers``: processes for the runs (the same figures for any number)."""
    from attacks.fdp_one_run import fdp_one_run_bound
    from attacks.whole_run_bounds import multi_run_lower_bound, one_run_estimate, one_run_lower_bound, run_claim_verdict
    from defenses.accounting import ParticipationSchedule, RunAccountant, privacy_spent
    from defenses.stack import parse_defense
    from fltr_audit.engine.data.load import load_splits

    options.check()
    check("workers", workers, POSITIVE_INT, "processes for the runs")
    stack = parse_defense(options.defense)
    if splits is None:
        splits = load_splits(options.data, options.fold, normalization="none", queries=None, seed=options.seed)
    runs = _runs(options, splits, int(workers))
    first = runs[0]
    rate = options.clients / (options.population or options.clients)
    canary_schedule = ParticipationSchedule(options.rounds, rate, first.participations)
    accountant = RunAccountant(stack, canary_schedule)
    delta = accountant.default_delta()
    spent = privacy_spent(stack, ParticipationSchedule.of_run(options.seed, options.rounds, options.clients,
                                                              options.population), delta)
    bound = one_run_lower_bound(first.scores, first.present, delta, options.confidence,
                                eligible=first.participations > 0)
    pool, pool_participations = fdp_pool(first.participations)
    fdp = fdp_one_run_bound(first.scores, first.present, delta, options.confidence, pool=pool)
    mu_claim = claimed_mu(stack, pool_participations)
    took_part = first.participations > 0  # a canary that never took part has score 0 either way
    estimate = one_run_estimate(first.scores[took_part], first.present[took_part], delta, seed=options.seed)
    if options.runs > 1:
        picks = [int(np.flatnonzero(r.participations > 0)[0]) if (r.participations > 0).any() else 0 for r in runs]
        multi = multi_run_lower_bound(np.array([r.scores[i] for r, i in zip(runs, picks)]),
                                      np.array([r.present[i] for r, i in zip(runs, picks)]), delta, options.confidence)
        multi_figures = (multi.epsilon_lb, multi.fp, multi.fn, multi.n0 + multi.n1)
    else:
        multi_figures = (float("nan"), 0, 0, 0)
    accounted = accountant.get_epsilon(delta)
    claim = stack.claim
    if claim.epsilon == float("inf"):
        verdict = "no claim"
    elif claim.scope == "aggregate" and first.scope == "message":
        verdict = "outside scope"  # the server reads the messages, the claim covers only their aggregate
    elif math.isfinite(mu_claim):  # a Gaussian claim: the f-DP bound against the claim as mu-GDP
        verdict = run_claim_verdict(fdp.mu_lb, mu_claim, fdp.mu_limit)
    else:
        verdict = run_claim_verdict(bound.epsilon_lb, accounted, bound.limit)
    if math.isfinite(mu_claim):
        tightness = fdp.mu_lb / mu_claim if mu_claim > 0 else float("nan")
    else:
        tightness = bound.epsilon_lb / accounted if 0 < accounted < float("inf") else float("nan")
    return RunAudit(
        algorithm=options.algorithm, defense=stack.name, scope=first.scope, canaries=options.canaries,
        rounds=options.rounds, runs=options.runs, sampling_rate=rate, delta=delta, epsilon_lb=bound.epsilon_lb,
        guesses=bound.guesses, correct=bound.correct, canary_limit=bound.limit,
        limited_by_canaries=bound.limited_by_canaries, epsilon_estimate=estimate.epsilon,
        estimate_low=estimate.low, estimate_high=estimate.high, epsilon_lb_multi=multi_figures[0],
        multi_fp=multi_figures[1], multi_fn=multi_figures[2], multi_n=multi_figures[3],
        epsilon_accounted_canaries=accounted, canary_participations_max=canary_schedule.worst,
        epsilon_server=spent.epsilon_server, epsilon_server_q99=spent.epsilon_server_q99,
        epsilon_observer=spent.epsilon_observer, claimed_epsilon=claim.epsilon, claimed_scope=claim.scope,
        claim_verdict=verdict, tightness=tightness, mu_lb=fdp.mu_lb, mu_limit=fdp.mu_limit, mu_claimed=mu_claim,
        epsilon_lb_fdp=fdp.epsilon_lb, fdp_guesses=fdp.guesses, fdp_correct=fdp.correct, fdp_pool=fdp.pool,
        fdp_participations=pool_participations, verdict_by="f-DP mu" if math.isfinite(mu_claim) else "Steinke eps",
        ndcg10=first.ndcg10,
        seconds=float(sum(r.seconds for r in runs)))


def whole_run_audit(config: RunSpec, splits: Any) -> RunAudit:
    """A campaign run's ``run_audits`` row (``audit_run.canaries`` set): ``run_audit_run`` on the
    run's data, training settings, defense and seed, ``audit_run.runs`` canary runs from that seed."""
    algo = config.algorithm
    options = RunAuditOptions(
        algorithm=algo.name, defense=config.defense.name, canaries=config.audit.run_canaries,
        runs=config.audit.run_runs, data=config.data.spec, fold=config.data.fold, rounds=algo.rounds,
        clients=algo.clients, population=algo.population, queries_per_client=algo.queries_per_client,
        click_model=algo.train_click_model, seed=config.seed, ranker=algo.ranker, params=algo.params,
        non_iid=algo.non_iid, poison="none" if algo.poison is None else algo.poison.text)
    return run_audit_run(options, splits)
