"""The figures of a whole-run canary audit (``runs.whole_run``): the one-run lower bound (Steinke
et al. 2023) and estimate (Andrew et al. 2024) of the first run, the multi-run bound over the runs,
the f-DP one-run bounds (Mahloujifar et al. 2025) over the canaries of the most frequent
participation count, the epsilon accounted over the run (against the server and an observer), and
the claim verdict: for a Gaussian declared mechanism the f-DP bound against the claim as mu-GDP,
else the Steinke bound against the accounted epsilon."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from attacks.canary_count import canaries_to_test
from attacks.fdp_one_run import fdp_one_run_bound
from attacks.float_channel import float_side_channel
from attacks.whole_run_bounds import multi_run_lower_bound, one_run_estimate, one_run_lower_bound, run_claim_verdict
from attacks.worst_case import claimed_mu
from defenses.accounting import ParticipationSchedule, RunAccountant, privacy_spent
from fltr_audit.spec.run import RunSpec
from fltr_audit.store.records import RunAuditRecord as RunAudit


def fdp_pool(participations: np.ndarray) -> tuple[np.ndarray, int]:
    """The canaries the f-DP bound guesses among: those with the most frequent positive number of
    participations (the smallest such number on a tie) -- a choice from the schedule alone, so that
    one mu-GDP claim holds exactly for every canary of the pool; and that number (0: none took part)."""
    counts = np.bincount(np.asarray(participations, dtype=np.int64))
    if len(counts) < 2 or counts[1:].sum() == 0:
        return np.zeros(len(participations), dtype=bool), 0
    n = int(np.argmax(counts[1:])) + 1
    return np.asarray(participations) == n, n


def whole_run_figures(spec: RunSpec, options: Any, runs: Sequence[Any], audit_key: str) -> RunAudit:
    """Every figure of the audit from its canary runs (``runs.whole_run.CanaryRun``, the first
    run's seed first) under ``options`` (``CanaryOptions``); the row carries ``audit_key``."""
    algo = spec.algorithm
    stack = spec.defense.build()
    first = runs[0]
    rate = algo.clients / (algo.population or algo.clients)
    canary_schedule = ParticipationSchedule(algo.rounds, rate, first.participations)
    accountant = RunAccountant(stack, canary_schedule, algo.queries_per_client)
    delta = accountant.default_delta()
    spent = privacy_spent(stack, ParticipationSchedule.of_run(spec.seed, algo.rounds, algo.clients,
                                                              algo.population), delta, algo.queries_per_client)
    bound = one_run_lower_bound(first.scores, first.present, delta, options.confidence,
                                eligible=first.participations > 0)
    pool, pool_participations = fdp_pool(first.participations)
    fdp = fdp_one_run_bound(first.scores, first.present, delta, options.confidence, pool=pool)
    mu_claim = claimed_mu(stack, pool_participations)
    took_part = first.participations > 0  # a canary that never took part has score 0 either way
    estimate, reason = one_run_estimate(first.scores[took_part], first.present[took_part], delta, seed=spec.seed,
                                        scope=first.scope)
    if len(runs) > 1:
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
        algorithm=algo.name, defense=stack.name, scope=first.scope, canaries=options.canaries,
        rounds=algo.rounds, runs=len(runs), sampling_rate=rate, delta=delta, epsilon_lb=bound.epsilon_lb,
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
        seconds=float(sum(r.seconds for r in runs)), audit_key=audit_key, epsilon_estimate_reason=reason,
        **_findings(first, options, delta, verdict, mu_claim, accounted, fdp.pool))


def _findings(first: Any, options: Any, delta: float, verdict: str, mu_claim: float, accounted: float,
              pool: int) -> dict:
    """The floating-point check of the first run's canaries (``attacks.float_channel``), and for an
    ``untestable`` verdict the canaries that would test the claim (``attacks.canary_count``): its mu
    with the f-DP pool's share of the canaries when it is Gaussian, else the accounted epsilon with
    the share that took part."""
    took_part = first.participations > 0
    floating = float_side_channel(first.scores, first.present, took_part)
    needed = float("nan")
    if verdict == "untestable":
        gdp = math.isfinite(mu_claim)
        needed = float(canaries_to_test(mu_claim if gdp else accounted, options.canaries, delta, options.confidence,
                                        pool / options.canaries if gdp else float(took_part.mean()), gdp=gdp))
    return dict(float_channel=floating.finding, float_channel_pvalue=floating.pvalue, canaries_needed=needed)
